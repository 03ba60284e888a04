/*
 * Placeholder for one of Grafana's own flot plugins (stackpercent, fillbelow,
 * dashes), which are not part of the Go module. Only Grafana's legacy "graph"
 * panel uses them, and sparkscope's dashboards use the "timeseries" panel; a
 * legacy graph panel still draws, without percent stacking, fill-below and
 * dashed lines.
 */
