// The -grafana13 mode: what Grafana 13 makes of a classic (v1) dashboard.
//
// Grafana 13 still provisions our v1 JSON, but converts it to the v2 schema
// when it loads it (docs/grafana.md). This mode converts the dashboard the way
// that conversion does for what our dashboards use, decodes the result
// strictly with the foundation-sdk's dashboardv2beta1 models (Grafana
// 13.0.2's), and reports every panel, query, variable, annotation and link
// that does not come out the other side:
//
//   - each panel becomes the element "panel-<id>" of a map: panels sharing an
//     id (or both without one) collapse into one, which Grafana's own
//     data-loss check refuses;
//   - panels become GridLayout items, inside RowsLayout rows when the
//     dashboard has rows (panels above the first row go into a row without a
//     header);
//   - a variable of a type the conversion does not know is dropped, and a
//     numeric sort, hide or refresh code it does not map falls back to the
//     default (the conversion maps sorts 0-4 only);
//   - every target becomes a PanelQuery whose DataQuery spec is the target.
//
// Where this model of the conversion is unsure, it reports a problem rather
// than pass: stricter than Grafana 13, never looser.
package main

import (
	"encoding/json"
	"fmt"
	"sort"

	v2 "github.com/grafana/grafana-foundation-sdk/go/dashboardv2beta1"
)

type object = map[string]any

// The numeric codes of v1 the conversion maps to v2's names; any other falls back to the first.
var (
	sortNames    = []string{"disabled", "alphabeticalAsc", "alphabeticalDesc", "numericalAsc", "numericalDesc"}
	hideNames    = []string{"dontHide", "hideLabel", "hideVariable"}
	refreshNames = []string{"never", "onDashboardLoad", "onTimeRangeChanged"}
	cursorSync   = []string{"Off", "Crosshair", "Tooltip"}
)

// counts of what Grafana's data-loss check compares before and after.
type counts struct {
	panels, queries, annotations, links, variables int
}

func checkGrafana13(raw []byte) []string {
	var board object
	if err := json.Unmarshal(raw, &board); err != nil {
		return []string{fmt.Sprintf("not a JSON object: %v", err)}
	}
	converted, problems := convertToV2(board)
	after, decodeProblems := decodeV2(converted)
	problems = append(problems, decodeProblems...)
	before := countV1(board)
	for _, loss := range []struct {
		what          string
		source, after int
	}{
		{"panels", before.panels, after.panels}, {"queries", before.queries, after.queries},
		{"annotations", before.annotations, after.annotations}, {"links", before.links, after.links},
		{"variables", before.variables, after.variables},
	} {
		if loss.after < loss.source {
			problems = append(problems, fmt.Sprintf("v2 conversion: %d of %d %s lost (Grafana 13 refuses a "+
				"conversion that loses data)", loss.source-loss.after, loss.source, loss.what))
		}
	}
	sort.Strings(problems)
	return problems
}

// strictly decodes one part of the converted dashboard with the SDK's model of its kind;
// the problems are its errors but "required field is missing" (CUE defaults Grafana fills in).
func strictly(at string, part any, decode func([]byte) error) []string {
	encoded, err := json.Marshal(part)
	if err != nil {
		return []string{fmt.Sprintf("v2 %s: cannot encode: %v", at, err)}
	}
	var problems []string
	for _, e := range flatten(decode(encoded)) {
		if e.Message != missingRequired {
			path := at
			if e.Path != "Dashboard" {
				path += "." + e.Path
			}
			problems = append(problems, fmt.Sprintf("v2 %s: %s", path, e.Message))
		}
	}
	return problems
}

// decodeV2 decodes the converted dashboard strictly and counts what survived. v0.0.22's
// union types (elements, variables, layouts) keep no member whose decoding returned an
// error, and an empty error list counts, so each member is decoded as its own kind here.
func decodeV2(converted object) (counts, []string) {
	problems := strictly("dashboard", without(converted, "elements", "variables", "layout"), func(b []byte) error {
		return (&v2.Dashboard{}).UnmarshalJSONStrict(b)
	})
	var c counts
	c.annotations, c.links = len(items(converted["annotations"])), len(items(converted["links"]))

	placed := map[string]int{}
	var place func(at string, layout object)
	place = func(at string, layout object) {
		switch layout["kind"] {
		case "GridLayout":
			problems = append(problems, strictly(at, layout, func(b []byte) error {
				return (&v2.GridLayoutKind{}).UnmarshalJSONStrict(b)
			})...)
			for _, item := range items(obj(layout["spec"])["items"]) {
				placed[fmt.Sprint(obj(obj(obj(item)["spec"])["element"])["name"])]++
			}
		case "RowsLayout":
			for i, row := range items(obj(layout["spec"])["rows"]) {
				where := fmt.Sprintf("%s.rows[%d]", at, i)
				spec := obj(obj(row)["spec"])
				problems = append(problems, strictly(where, without(spec, "layout"), func(b []byte) error {
					return (&v2.RowsLayoutRowSpec{}).UnmarshalJSONStrict(b)
				})...)
				place(where+".layout", obj(spec["layout"]))
			}
		default:
			problems = append(problems, fmt.Sprintf("v2 %s: layout kind %v not modelled", at, layout["kind"]))
		}
	}
	place("layout", obj(converted["layout"]))

	elements := obj(converted["elements"])
	names := make([]string, 0, len(elements))
	for name := range elements {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		element := obj(elements[name])
		at := "elements[" + name + "]"
		panel := &v2.PanelKind{}
		found := strictly(at, element, panel.UnmarshalJSONStrict)
		problems = append(problems, found...)
		if placed[name] != 1 {
			problems = append(problems, fmt.Sprintf("v2 %s: placed %d times in the layout", at, placed[name]))
		}
		if len(found) == 0 && element["kind"] == "Panel" && placed[name] == 1 {
			c.panels++
			c.queries += len(panel.Spec.Data.Spec.Queries)
		}
	}

	decoders := map[string]func([]byte) error{
		"QueryVariable":    func(b []byte) error { return (&v2.QueryVariableKind{}).UnmarshalJSONStrict(b) },
		"CustomVariable":   func(b []byte) error { return (&v2.CustomVariableKind{}).UnmarshalJSONStrict(b) },
		"ConstantVariable": func(b []byte) error { return (&v2.ConstantVariableKind{}).UnmarshalJSONStrict(b) },
		"TextVariable":     func(b []byte) error { return (&v2.TextVariableKind{}).UnmarshalJSONStrict(b) },
		"IntervalVariable": func(b []byte) error { return (&v2.IntervalVariableKind{}).UnmarshalJSONStrict(b) },
	}
	for i, variable := range items(converted["variables"]) {
		at := fmt.Sprintf("variables[%d] (%v)", i, obj(obj(variable)["spec"])["name"])
		found := strictly(at, variable, decoders[fmt.Sprint(obj(variable)["kind"])])
		problems = append(problems, found...)
		if len(found) == 0 {
			c.variables++
		}
	}
	return c, problems
}

func items(value any) []any {
	items, _ := value.([]any)
	return items
}

func obj(value any) object {
	o, _ := value.(object)
	return o
}

// leafPanels are the panels that become elements: every non-row panel, those inside rows too.
func leafPanels(board object) []object {
	var leaves []object
	for _, item := range items(board["panels"]) {
		panel := obj(item)
		if panel == nil {
			continue
		}
		if panel["type"] == "row" {
			for _, inner := range items(panel["panels"]) {
				if p := obj(inner); p != nil {
					leaves = append(leaves, p)
				}
			}
			continue
		}
		leaves = append(leaves, panel)
	}
	return leaves
}

func countV1(board object) counts {
	c := counts{annotations: len(items(obj(board["annotations"])["list"])), links: len(items(board["links"])),
		variables: len(items(obj(board["templating"])["list"]))}
	for _, panel := range leafPanels(board) {
		c.panels++
		c.queries += len(items(panel["targets"]))
	}
	return c
}

// code maps a v1 numeric code (or its v2 name) to the v2 name; ok is false when the
// conversion would fall back to the default and lose the setting.
func code(value any, names []string) (string, bool) {
	switch v := value.(type) {
	case nil:
		return names[0], true
	case float64:
		if v == float64(int(v)) && int(v) >= 0 && int(v) < len(names) {
			return names[int(v)], true
		}
	case string:
		return v, true
	}
	return names[0], false
}

func dataQuery(datasource any, spec any) object {
	query := object{"kind": "DataQuery", "version": "v0", "spec": spec}
	if ds := obj(datasource); ds != nil {
		query["group"], _ = ds["type"].(string)
		if uid, ok := ds["uid"].(string); ok {
			query["datasource"] = object{"name": uid}
		}
	}
	return query
}

func without(source object, keys ...string) object {
	out := object{}
	for k, v := range source {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

func copyKeys(into, from object, keys ...string) {
	for _, k := range keys {
		if v, ok := from[k]; ok {
			into[k] = v
		}
	}
}

func convertToV2(board object) (object, []string) {
	var notes []string
	timeRange := obj(board["time"])
	settings := object{"from": "now-6h", "to": "now", "autoRefresh": "", "hideTimepicker": false,
		"fiscalYearStartMonth": 0, "autoRefreshIntervals": []any{"5s", "10s", "30s", "1m", "5m", "15m", "30m",
			"1h", "2h", "1d"}}
	copyKeys(settings, timeRange, "from", "to")
	copyKeys(settings, board, "timezone", "weekStart", "fiscalYearStartMonth")
	if refresh, ok := board["refresh"].(string); ok {
		settings["autoRefresh"] = refresh
	}
	if picker := obj(board["timepicker"]); picker != nil {
		if intervals := items(picker["refresh_intervals"]); len(intervals) > 0 {
			settings["autoRefreshIntervals"] = intervals
		}
		copyKeys(settings, picker, "nowDelay")
		if hidden, ok := picker["hidden"]; ok {
			settings["hideTimepicker"] = hidden
		}
	}
	sync, ok := code(board["graphTooltip"], cursorSync)
	if !ok {
		notes = append(notes, fmt.Sprintf("v2 conversion: graphTooltip %v becomes Off", board["graphTooltip"]))
	}
	out := object{"title": board["title"], "tags": orEmpty(board["tags"]), "cursorSync": sync,
		"preload": board["preload"] == true, "timeSettings": settings}
	copyKeys(out, board, "description", "editable", "liveNow", "revision")

	var links []any
	for _, item := range items(board["links"]) {
		link := obj(item)
		converted := object{"title": link["title"], "type": "link", "icon": "", "tooltip": "", "tags": []any{},
			"asDropdown": false, "targetBlank": false, "includeVars": false, "keepTime": false}
		copyKeys(converted, link, "title", "type", "icon", "tooltip", "tags", "asDropdown", "targetBlank",
			"includeVars", "keepTime", "url", "placement")
		links = append(links, converted)
	}
	out["links"] = orEmpty(links)

	elements, layout, elementNotes := convertPanels(board)
	notes = append(notes, elementNotes...)
	out["elements"], out["layout"] = elements, layout

	variables, variableNotes := convertVariables(board)
	notes = append(notes, variableNotes...)
	out["variables"] = variables

	var annotations []any
	for _, item := range items(obj(board["annotations"])["list"]) {
		annotation := obj(item)
		spec := object{"query": dataQuery(annotation["datasource"], orObject(annotation["target"])),
			"enable": annotation["enable"] == true, "hide": annotation["hide"] == true,
			"iconColor": annotation["iconColor"], "name": annotation["name"]}
		copyKeys(spec, annotation, "builtIn", "filter")
		annotations = append(annotations, object{"kind": "AnnotationQuery", "spec": spec})
	}
	out["annotations"] = orEmpty(annotations)
	return out, notes
}

func orEmpty(value any) any {
	if items, ok := value.([]any); ok && items != nil {
		return items
	}
	return []any{}
}

func orObject(value any) any {
	if o := obj(value); o != nil {
		return o
	}
	return object{}
}

func convertPanels(board object) (object, object, []string) {
	var notes []string
	elements := object{}
	owner := map[string]string{}
	element := func(panel object) string {
		id, isNumber := panel["id"].(float64)
		if panel["id"] != nil && (!isNumber || id != float64(int64(id))) {
			notes = append(notes, fmt.Sprintf("v2 conversion: panel %q: id %v is not a whole number", panel["title"],
				panel["id"]))
		}
		name := fmt.Sprintf("panel-%d", int64(id))
		if previous, taken := owner[name]; taken {
			notes = append(notes, fmt.Sprintf("v2 conversion: panels %q and %q both become element %s: Grafana 13 "+
				"keeps one; give every panel its own id", previous, panel["title"], name))
		}
		owner[name], _ = panel["title"].(string)
		elements[name] = convertPanel(panel)
		return name
	}
	item := func(panel object, name string, y any) object {
		grid := obj(panel["gridPos"])
		spec := object{"x": 0, "y": 0, "width": 6, "height": 3,
			"element": object{"kind": "ElementReference", "name": name}}
		for v1Key, v2Key := range map[string]string{"x": "x", "y": "y", "w": "width", "h": "height"} {
			if v, ok := grid[v1Key]; ok {
				spec[v2Key] = v
			}
		}
		if y != nil {
			spec["y"] = y
		}
		if repeat, ok := panel["repeat"].(string); ok && repeat != "" {
			spec["repeat"] = object{"mode": "variable", "value": repeat}
		}
		return object{"kind": "GridLayoutItem", "spec": spec}
	}
	grid := func(items []any) object {
		return object{"kind": "GridLayout", "spec": object{"items": orEmpty(items)}}
	}

	panels := items(board["panels"])
	hasRows := false
	for _, p := range panels {
		hasRows = hasRows || obj(p)["type"] == "row"
	}
	if !hasRows {
		var items []any
		for _, p := range panels {
			if panel := obj(p); panel != nil {
				name := element(panel)
				items = append(items, item(panel, name, nil))
			}
		}
		return elements, grid(items), notes
	}
	var rows []any
	var current object
	var currentItems []any
	var rowY float64
	flush := func() {
		if current != nil {
			obj(current["spec"])["layout"] = grid(currentItems)
			rows = append(rows, current)
		}
	}
	offset := func(panel object) any {
		y, _ := obj(panel["gridPos"])["y"].(float64)
		return y - rowY - 1 // y within the row, below its header
	}
	for _, p := range panels {
		panel := obj(p)
		if panel == nil {
			continue
		}
		if panel["type"] == "row" {
			flush()
			rowY, _ = obj(panel["gridPos"])["y"].(float64)
			currentItems = nil
			for _, inner := range items(panel["panels"]) {
				if collapsed := obj(inner); collapsed != nil {
					name := element(collapsed)
					currentItems = append(currentItems, item(collapsed, name, offset(collapsed)))
				}
			}
			title, _ := panel["title"].(string)
			spec := object{"title": title, "collapse": panel["collapsed"] == true}
			if repeat, ok := panel["repeat"].(string); ok && repeat != "" {
				spec["repeat"] = object{"mode": "variable", "value": repeat}
			}
			current = object{"kind": "RowsLayoutRow", "spec": spec}
			continue
		}
		name := element(panel)
		if current == nil { // panels above the first row: a row without a header
			rowY = -1
			current = object{"kind": "RowsLayoutRow", "spec": object{"title": "", "collapse": false, "hideHeader": true}}
		}
		currentItems = append(currentItems, item(panel, name, offset(panel)))
	}
	flush()
	return elements, object{"kind": "RowsLayout", "spec": object{"rows": orEmpty(rows)}}, notes
}

func convertPanel(panel object) object {
	var queries []any
	for _, t := range items(panel["targets"]) {
		target := obj(t)
		datasource := target["datasource"]
		if datasource == nil {
			datasource = panel["datasource"]
		}
		refID, _ := target["refId"].(string)
		queries = append(queries, object{"kind": "PanelQuery", "spec": object{
			"refId": refID, "hidden": target["hide"] == true,
			"query": dataQuery(datasource, without(target, "refId", "hide", "datasource"))}})
	}
	var transformations []any
	for _, t := range items(panel["transformations"]) {
		transformation := obj(t)
		transformations = append(transformations, object{"kind": transformation["id"], "spec": transformation})
	}
	options := object{}
	copyKeys(options, panel, "interval", "maxDataPoints", "timeFrom", "timeShift", "cacheTimeout",
		"hideTimeOverride", "queryCachingTTL")
	fieldConfig := obj(panel["fieldConfig"])
	if fieldConfig == nil {
		fieldConfig = object{"defaults": object{}, "overrides": []any{}}
	}
	version, _ := panel["pluginVersion"].(string)
	spec := object{"id": panel["id"], "title": panel["title"], "links": orEmpty(panel["links"]),
		"data": object{"kind": "QueryGroup", "spec": object{"queries": orEmpty(queries),
			"transformations": orEmpty(transformations), "queryOptions": options}},
		"vizConfig": object{"kind": "VizConfig", "group": panel["type"], "version": version,
			"spec": object{"options": orObject(panel["options"]), "fieldConfig": fieldConfig}}}
	if spec["id"] == nil {
		spec["id"] = 0
	}
	copyKeys(spec, panel, "description", "transparent")
	return object{"kind": "Panel", "spec": spec}
}

// variableKinds: v1 type -> v2 kind, with the v1 keys each carries over as they are.
var variableKinds = map[string]struct {
	kind string
	keys []string
}{
	"query":    {"QueryVariable", []string{"regex", "definition", "options", "allValue", "allowCustomValue"}},
	"custom":   {"CustomVariable", []string{"query", "options", "allValue", "allowCustomValue"}},
	"constant": {"ConstantVariable", []string{"query"}},
	"textbox":  {"TextVariable", []string{"query"}},
	"interval": {"IntervalVariable", []string{"query", "options", "auto", "auto_min", "auto_count"}},
}

func convertVariables(board object) ([]any, []string) {
	var notes []string
	variables := []any{}
	for _, item := range items(obj(board["templating"])["list"]) {
		variable := obj(item)
		kind, known := variableKinds[fmt.Sprint(variable["type"])]
		if !known {
			notes = append(notes, fmt.Sprintf("v2 conversion: variable %q of type %v is not modelled here",
				variable["name"], variable["type"]))
			continue
		}
		spec := object{"name": variable["name"], "skipUrlSync": variable["skipUrlSync"] == true,
			"current": orObject(variable["current"])}
		copyKeys(spec, variable, "label", "description")
		copyKeys(spec, variable, kind.keys...)
		hide, ok := code(variable["hide"], hideNames)
		if !ok {
			notes = append(notes, fmt.Sprintf("v2 conversion: variable %q: hide %v is lost", variable["name"],
				variable["hide"]))
		}
		spec["hide"] = hide
		switch kind.kind {
		case "QueryVariable", "CustomVariable":
			spec["multi"], spec["includeAll"] = variable["multi"] == true, variable["includeAll"] == true
			spec["allowCustomValue"] = variable["allowCustomValue"] != false
			if _, set := spec["options"]; !set {
				spec["options"] = []any{}
			}
		case "IntervalVariable":
			spec["refresh"] = "onTimeRangeChanged"
		}
		if kind.kind == "QueryVariable" {
			refresh, ok := code(variable["refresh"], refreshNames)
			if !ok {
				notes = append(notes, fmt.Sprintf("v2 conversion: variable %q: refresh %v is lost (the conversion "+
					"maps 0-2 only)", variable["name"], variable["refresh"]))
			}
			sortName, ok := code(variable["sort"], sortNames)
			if !ok {
				notes = append(notes, fmt.Sprintf("v2 conversion: variable %q: sort %v is lost (the conversion "+
					"maps 0-4 only; use one of those)", variable["name"], variable["sort"]))
			}
			spec["refresh"], spec["sort"] = refresh, sortName
			if _, set := spec["regex"]; !set {
				spec["regex"] = ""
			}
			query := variable["query"]
			if text, isText := query.(string); isText {
				query = object{"__legacyStringValue": text}
			}
			spec["query"] = dataQuery(variable["datasource"], query)
		}
		spec["current"] = currentOption(spec["current"])
		if options, has := spec["options"]; has {
			var converted []any
			for _, option := range items(options) {
				converted = append(converted, currentOption(option))
			}
			spec["options"] = orEmpty(converted)
		}
		variables = append(variables, object{"kind": kind.kind, "spec": spec})
	}
	return variables, notes
}

// currentOption keeps a v1 option's text and value (a string or a list of strings) and selected.
func currentOption(value any) object {
	option := obj(value)
	out := object{"text": "", "value": ""}
	copyKeys(out, option, "text", "value", "selected")
	return out
}
