/*
 * A gauge for jQuery flot, written for sparkscope's native Grafana build.
 *
 * Grafana's Gauge panel (grafana-ui Gauge.tsx) draws through
 * `$.plot(el, [{data: [[0, value]]}], {series: {gauges: {...}}})` and expects a
 * flot plugin that understands `series.gauges`. The one Grafana ships is not
 * part of the Go module, so this small one reads the same options:
 *   gauge:     {min, max, width, background: {color}}
 *   threshold: {show, width, values: [{value, color}], label: {show, margin, font: {size}}}
 *   value:     {color, formatter(), font: {size, family}}
 * and draws a 240-degree arc: the background track, the value arc in the
 * value's colour, the threshold bands outside it, and the formatted value in
 * the middle.
 */
(function ($) {
  'use strict';

  var START = (150 / 180) * Math.PI; // lower left, clockwise to lower right
  var SWEEP = (240 / 180) * Math.PI;

  function fraction(value, min, max) {
    if (!(max > min) || value === null || value === undefined || isNaN(value)) {
      return 0;
    }
    return Math.min(1, Math.max(0, (value - min) / (max - min)));
  }

  function arc(ctx, cx, cy, radius, width, from, to, color) {
    if (to <= from) {
      return;
    }
    ctx.beginPath();
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.arc(cx, cy, radius, START + SWEEP * from, START + SWEEP * to, false);
    ctx.stroke();
  }

  function draw(plot, ctx) {
    var opts = plot.getOptions().series.gauges;
    if (!opts || !opts.show) {
      return;
    }
    var series = plot.getData()[0];
    var point = series && series.data && series.data[0];
    var value = point ? point[1] : null;
    var gauge = opts.gauge || {};
    var threshold = opts.threshold || {};
    var min = gauge.min === undefined ? 0 : gauge.min;
    var max = gauge.max === undefined ? 100 : gauge.max;
    var width = gauge.width || 20;
    var markers = threshold.show ? threshold.width || width / 5 : 0;
    var labels = threshold.label && threshold.label.show ? (threshold.label.font && threshold.label.font.size) || 12 : 0;

    var placeholder = plot.getPlaceholder();
    var w = placeholder.width();
    var h = placeholder.height();
    // The arc spans 1 + sin(30 deg) = 1.5 radii vertically.
    var outer = Math.max(4, Math.min(w / 2, h / 1.5) - 4 - labels);
    var radius = outer - markers - width / 2 - (markers ? 2 : 0);
    var cx = w / 2;
    var cy = outer + labels + 2;

    ctx.save();
    ctx.lineCap = 'butt';
    arc(ctx, cx, cy, radius, width, 0, 1, (gauge.background && gauge.background.color) || '#eee');
    var valueColor = (opts.value && opts.value.color) || '#73bf69';
    arc(ctx, cx, cy, radius, width, 0, fraction(value, min, max), valueColor);

    var steps = (threshold.values || []).slice().sort(function (a, b) {
      return a.value - b.value;
    });
    if (markers) {
      for (var i = 0; i < steps.length; i++) {
        var from = fraction(steps[i].value, min, max);
        var to = i + 1 < steps.length ? fraction(steps[i + 1].value, min, max) : 1;
        arc(ctx, cx, cy, outer - markers / 2, markers, i === 0 ? 0 : from, to, steps[i].color);
      }
    }
    if (labels) {
      ctx.fillStyle = valueColor;
      ctx.font = labels + 'px ' + ((opts.value && opts.value.font && opts.value.font.family) || 'sans-serif');
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      for (var j = 1; j < steps.length; j++) {
        var angle = START + SWEEP * fraction(steps[j].value, min, max);
        var r = outer + labels / 2 + 2;
        ctx.fillText(String(steps[j].value), cx + r * Math.cos(angle), cy + r * Math.sin(angle));
      }
    }

    var text = opts.value && opts.value.formatter ? opts.value.formatter(value) : String(value);
    var font = (opts.value && opts.value.font) || {};
    ctx.fillStyle = valueColor;
    ctx.font = (font.size || 14) + 'px ' + (font.family || 'sans-serif');
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText(text, cx, cy);
    ctx.restore();
  }

  function init(plot) {
    plot.hooks.processOptions.push(function (p, options) {
      if (options.series.gauges && options.series.gauges.show) {
        // A gauge has no axes or grid; its one data point is drawn as the arc.
        options.grid.show = false;
        $.each(options.xaxes.concat(options.yaxes), function (_, axis) {
          axis.show = false;
        });
        p.hooks.draw.push(draw);
      }
    });
  }

  $.plot.plugins.push({
    init: init,
    options: { series: { gauges: { show: false } } },
    name: 'gauge',
    version: '1.0.0-sparkscope',
  });
})(window.jQuery);
