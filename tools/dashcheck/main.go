// dashcheck decodes Grafana dashboard JSON files strictly against Grafana 12's
// models (grafana-foundation-sdk v0.0.22, Apache-2.0) and prints one line per
// problem:
//
//	<file>: <where>: <problem>
//
// Exit status: 0 when every file is clean, 1 when a problem was found, 2 on
// usage errors or a file that cannot be read.
//
// Usage: dashcheck DASHBOARD.json...
//
//	dashcheck -alerting ALERTING.yaml...   (alerting.go: provisioned alert rules,
//	                                        contact points and policies)
//	dashcheck -grafana13 DASHBOARD.json...  (v2.go: Grafana 13's conversion to the
//	                                        v2 schema, decoded strictly)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Grafana fills in a missing required field from its CUE defaults when it
// loads a dashboard, so an absent field is no defect. Only this exact message
// is ignored: "required field is null" and every other error still count.
const missingRequired = "required field is missing from input"

// The SDK's error paths name panels by position (panels[3], or panels[3].panels[0]
// inside a collapsed row); a reader looks for the title, the sort for the numbers.
var panelPath = regexp.MustCompile(`^panels\[(\d+)\](?:\.panels\[(\d+)\])?`)

// Dashboard.UnmarshalJSONStrict decodes a panel's fieldConfig loosely (only
// defaults.custom strictly, per panel type), so the errors of that loose decode
// are dropped and the whole fieldConfig is decoded again strictly in fieldConfigProblems.
var looseFieldConfig = regexp.MustCompile(`^panels\[\d+\](?:\.panels\[\d+\])?\.fieldConfig$`)

type problem struct {
	panel []int // position in panels (and in the row's panels), for a stable order
	text  string
}

type panel struct {
	path   string // as the SDK writes it: panels[3] or panels[3].panels[0]
	label  string
	raw    json.RawMessage
	fields map[string]json.RawMessage
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-alerting" {
		plugins.RegisterDefaultPlugins() // expression models are decoded by their type
		os.Exit(runAlerting(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "-grafana13" {
		os.Exit(checkFiles(os.Args[2:], checkGrafana13))
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashcheck DASHBOARD.json...")
		os.Exit(2)
	}
	// Without the panel plugins' variants, options and fieldConfig.defaults.custom
	// would be decoded loosely, so a heatmap's Grafana 10 options would pass.
	plugins.RegisterDefaultPlugins()

	os.Exit(checkFiles(os.Args[1:], func(raw []byte) []string {
		var texts []string
		for _, p := range check(raw) {
			texts = append(texts, p.text)
		}
		return texts
	}))
}

// checkFiles prints each file's problems as "<path>: <problem>" and returns
// the exit status: 0 all clean, 1 a problem found, 2 a file it could not read.
func checkFiles(paths []string, check func([]byte) []string) int {
	status := 0
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: cannot read: %v\n", path, err)
			status = 2
			continue
		}
		problems := check(raw)
		for _, p := range problems {
			fmt.Printf("%s: %s\n", path, p)
		}
		if len(problems) > 0 && status == 0 {
			status = 1
		}
	}
	return status
}

func check(raw []byte) []problem {
	// Not JSON, or not an object, is a defect of the dashboard, not of the input.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return []problem{{text: fmt.Sprintf("not a JSON object: %v", err)}}
	}
	panels := listPanels(top["panels"], "panels")
	labels := map[string]string{}
	for _, p := range panels {
		labels[p.path] = p.label
	}

	decoded := &dashboard.Dashboard{}
	var decodeErrs cog.BuildErrors
	for _, e := range flatten(decoded.UnmarshalJSONStrict(raw)) {
		if !looseFieldConfig.MatchString(e.Path) {
			decodeErrs = append(decodeErrs, e)
		}
	}
	for _, p := range panels {
		decodeErrs = append(decodeErrs, flatten(fieldConfigProblems(p))...)
	}
	var errs cog.BuildErrors
	failed := map[string]bool{}
	for _, e := range decodeErrs {
		failed[e.Path] = true
		if e.Message != missingRequired {
			errs = append(errs, e)
		}
	}

	// Validate checks the schema's bounds (gridPos.w <= 24, ...). v0.0.22's
	// PanelOrRowPanel keeps no panel whose decoding returned an error, and an
	// empty error list counts, so each panel is decoded and validated on its own.
	decoded.Panels = nil
	invalid := flatten(decoded.Validate())
	for _, p := range panels {
		if !strings.Contains(p.path, ".panels[") { // a row validates its own panels
			invalid = append(invalid, flatten(validatePanel(p))...)
		}
	}
	for _, e := range invalid {
		// A field that was missing or did not decode is left at zero: its bound says nothing more.
		if !failed[e.Path] {
			errs = append(errs, e)
		}
	}

	var problems []problem
	for _, e := range errs {
		problems = append(problems, describe(e, labels))
	}
	// Unexpected fields come out in map order: sort so that runs can be compared.
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		for k := 0; k < len(a.panel) && k < len(b.panel); k++ {
			if a.panel[k] != b.panel[k] {
				return a.panel[k] < b.panel[k]
			}
		}
		if len(a.panel) != len(b.panel) {
			return len(a.panel) < len(b.panel)
		}
		return a.text < b.text
	})
	return problems
}

// listPanels returns every panel, rows' nested panels included. What does not
// decode is skipped here: the SDK's own pass reports it.
func listPanels(raw json.RawMessage, prefix string) []panel {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var panels []panel
	for i, item := range list {
		p := panel{path: prefix + "[" + strconv.Itoa(i) + "]", raw: item}
		if json.Unmarshal(item, &p.fields) != nil {
			continue
		}
		p.label = fmt.Sprintf("panel id=%s type=%s title=%s", p.fields["id"], p.fields["type"], p.fields["title"])
		panels = append(panels, p)
		if prefix == "panels" {
			panels = append(panels, listPanels(p.fields["panels"], p.path+".panels")...)
		}
	}
	return panels
}

func validatePanel(p panel) error {
	var err error
	if string(p.fields["type"]) == `"row"` {
		row := &dashboard.RowPanel{}
		_ = row.UnmarshalJSONStrict(p.raw) // reported by the dashboard's decoding
		err = row.Validate()
	} else {
		one := &dashboard.Panel{}
		_ = one.UnmarshalJSONStrict(p.raw)
		err = one.Validate()
	}
	if err == nil {
		return nil
	}
	return cog.MakeBuildErrors(p.path, err)
}

// fieldConfigProblems decodes a panel's fieldConfig strictly, and each override
// property as what its id names: a field option (unit, links, ...) or, for
// custom.*, the panel type's own field config. Grafana ignores an override
// whose id it does not know, so an unknown id is a problem too.
func fieldConfigProblems(p panel) error {
	raw := p.fields["fieldConfig"]
	if raw == nil || string(raw) == "null" {
		return nil
	}
	at := p.path + ".fieldConfig"
	var errs cog.BuildErrors
	if err := (&dashboard.FieldConfigSource{}).UnmarshalJSONStrict(raw); err != nil {
		errs = append(errs, cog.MakeBuildErrors(at, err)...)
	}

	var panelType string
	_ = json.Unmarshal(p.fields["type"], &panelType)
	var source struct {
		Overrides []struct {
			Properties []struct {
				ID    string          `json:"id"`
				Value json.RawMessage `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	}
	if json.Unmarshal(raw, &source) != nil {
		return errs // not nil: the strict decode above has said why
	}
	for i, override := range source.Overrides {
		for j, property := range override.Properties {
			where := fmt.Sprintf("%s.overrides[%d].properties[%d]", at, i, j)
			if err := checkProperty(panelType, property.ID, property.Value); err != nil {
				errs = append(errs, cog.MakeBuildErrors(where, err)...)
			}
		}
	}
	if len(errs) == 0 {
		return nil // a nil BuildErrors would be a non-nil error
	}
	return errs
}

func checkProperty(panelType, id string, value json.RawMessage) error {
	if value == nil {
		value = json.RawMessage("null")
	}
	keys := strings.Split(id, ".")
	custom := len(keys) > 1 && keys[0] == "custom"
	if custom {
		keys = keys[1:]
	}
	// An id is a dotted path into the field config: nest the value under it.
	doc := []byte(value)
	for i := len(keys) - 1; i >= 0; i-- {
		key, _ := json.Marshal(keys[i])
		doc = []byte(fmt.Sprintf("{%s:%s}", key, doc))
	}
	if !custom {
		return (&dashboard.FieldConfig{}).UnmarshalJSONStrict(doc)
	}
	variant, found := cog.ConfigForPanelcfgVariant(panelType)
	if !found || variant.StrictFieldConfigUnmarshaler == nil {
		return nil // a panel type the SDK does not model: nothing to check against
	}
	_, err := variant.StrictFieldConfigUnmarshaler(doc)
	return err
}

// flatten turns any error of the SDK into path-and-message pairs; a bare error
// (panels not an array, which stops the decoding) is put at the dashboard.
func flatten(err error) cog.BuildErrors {
	if err == nil {
		return nil
	}
	errs := cog.MakeBuildErrors("", err)
	for _, e := range errs {
		e.Path = strings.TrimPrefix(e.Path, ".")
		if e.Path == "" {
			e.Path = "Dashboard"
		}
	}
	return errs
}

// describe names the panel an error is in by its id, type and title.
func describe(e *cog.BuildError, labels map[string]string) problem {
	path := e.Path
	m := panelPath.FindStringSubmatch(path)
	if m == nil {
		return problem{text: path + ": " + e.Message}
	}
	var position []int
	for _, index := range m[1:] {
		if index != "" {
			i, _ := strconv.Atoi(index)
			position = append(position, i)
		}
	}
	if label := labels[m[0]]; label != "" {
		path = label + " (" + path + ")"
	}
	return problem{panel: position, text: path + ": " + e.Message}
}
