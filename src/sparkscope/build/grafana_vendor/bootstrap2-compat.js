/*
 * Grafana's AngularJS code sets one Bootstrap 2 default
 * ($.fn.tooltip.defaults.animation); Bootstrap 3 keeps defaults in
 * Constructor.DEFAULTS. Alias them so the app starts; everything else it
 * calls (tooltip, modal, typeahead) has the same shape in Bootstrap 3.
 */
(function ($) {
  'use strict';
  ['tooltip', 'popover'].forEach(function (name) {
    var plugin = $.fn[name];
    if (plugin && plugin.Constructor && !plugin.defaults) {
      plugin.defaults = plugin.Constructor.DEFAULTS;
    }
  });
})(window.jQuery);
