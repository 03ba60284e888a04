// The alerting mode: Grafana's file-provisioning format for alert rules,
// contact points and notification policies (provisioning/alerting/*.yaml,
// apiVersion 1), checked strictly:
//
//	dashcheck -alerting FILE.yaml...
//
// Grafana reads these files into its own file types (pkg/services/provisioning/
// alerting: AlertRuleGroupV1, AlertRuleV1, QueryV1, ContactPointV1 ...) with a
// lenient YAML decoder: a misspelt key is silently dropped (noDataStat: a rule
// that falls back to the default NoData). Here every key must be one those
// types know; each rule is then mapped to the provisioning API's model and
// decoded strictly by grafana-foundation-sdk's alerting.Rule (its queries'
// expression models by the SDK's expr types, per type: reduce, math,
// threshold, classic_conditions ...), each receiver by alerting.ContactPoint
// and each policy by alerting.NotificationPolicy. On top: enum values against
// the SDK's constants, durations, refIds that exist, InfluxDB query models
// (which the SDK does not model) against the keys Grafana's InfluxDB backend
// reads, and annotation and label templates parsed and run with Grafana's
// template functions.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/grafana/grafana-foundation-sdk/go/alerting"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/expr"
	"gopkg.in/yaml.v3"
)

// Keys of Grafana's file types (json/yaml tags of the *V1 structs).
var (
	fileKeys = set("apiVersion", "groups", "deleteRules", "contactPoints", "deleteContactPoints", "policies",
		"resetPolicies", "templates", "deleteTemplates", "muteTimes", "deleteMuteTimes")
	groupKeys = set("orgId", "name", "folder", "interval", "rules")
	ruleKeys  = set("uid", "title", "condition", "data", "dasboardUid", "dashboardUid", "panelId", "noDataState",
		"execErrState", "for", "keepFiringFor", "missing_series_evals_to_resolve", "annotations", "labels",
		"isPaused", "notification_settings", "record")
	contactPointKeys = set("orgId", "name", "receivers")
	receiverKeys     = set("uid", "type", "settings", "disableResolveMessage")
	deleteKeys       = set("orgId", "uid")
	// What Grafana's InfluxDB backend reads from a query model (pkg/tsdb/influxdb/
	// models/model_parser.go), plus what every query model carries.
	influxModelKeys = set("refId", "datasource", "hide", "intervalMs", "maxDataPoints", "queryType", "query",
		"rawQuery", "resultFormat", "alias", "policy", "measurement", "tags", "groupBy", "select",
		"orderByTime", "limit", "slimit", "tz")
	// What Grafana's Prometheus backend reads from a query model (pkg/promlib/models/
	// query.go: PrometheusQueryProperties and the common properties).
	promModelKeys = set("refId", "datasource", "hide", "intervalMs", "maxDataPoints", "queryType", "expr",
		"instant", "range", "exemplar", "editorMode", "legendFormat", "format", "interval", "intervalFactor",
		"utcOffsetSec", "scope", "adhocFilters", "groupByKeys")
)

var (
	ruleUID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
	// Prometheus' model.ParseDuration, which Grafana uses for interval, for, keepFiringFor.
	promDuration = regexp.MustCompile(`^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$`)
	mathRef      = regexp.MustCompile(`\$\{([^}]+)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
	letters      = regexp.MustCompile(`^[A-Za-z]+$`)
	// Plain scalars YAML 1.1 reads as booleans or octal and YAML 1.2 as strings or decimal.
	yaml11Ambiguous = regexp.MustCompile(`^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|0[0-7]+)$`)
)

func set(keys ...string) map[string]bool {
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}

func runAlerting(paths []string) int {
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "usage: dashcheck -alerting ALERTING.yaml...")
		return 2
	}
	return checkFiles(paths, checkAlertingFile)
}

type alertingCheck struct {
	problems []string
}

func (c *alertingCheck) add(where, format string, args ...any) {
	c.problems = append(c.problems, where+": "+fmt.Sprintf(format, args...))
}

func (c *alertingCheck) sdk(where string, err error) {
	if err == nil {
		return
	}
	for _, e := range cog.MakeBuildErrors("", err) {
		path := strings.TrimPrefix(e.Path, ".")
		if path != "" {
			path = where + "." + path
		} else {
			path = where
		}
		c.add(path, "%s", e.Message)
	}
}

func checkAlertingFile(raw []byte) []string {
	c := &alertingCheck{}
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		return []string{"not YAML: " + err.Error()}
	}
	c.ambiguousScalars(&node, "file")
	var doc map[string]any
	if err := node.Decode(&doc); err != nil {
		return []string{"not a YAML mapping of string keys: " + err.Error()}
	}
	c.unknownKeys("file", doc, fileKeys)
	if v, ok := doc["apiVersion"].(int); !ok || v != 1 {
		c.add("apiVersion", "must be 1 (the only version of this format), got %v", doc["apiVersion"])
	}
	uids, titles := map[string]string{}, map[string]string{}
	for i, g := range list(c, "groups", doc["groups"]) {
		c.group(fmt.Sprintf("groups[%d]", i), g, uids, titles)
	}
	receivers := map[string]bool{}
	for i, cp := range list(c, "contactPoints", doc["contactPoints"]) {
		c.contactPoint(fmt.Sprintf("contactPoints[%d]", i), cp, receivers)
	}
	for i, p := range list(c, "policies", doc["policies"]) {
		c.policy(fmt.Sprintf("policies[%d]", i), p, receivers)
	}
	for _, key := range []string{"deleteRules", "deleteContactPoints"} {
		for i, d := range list(c, key, doc[key]) {
			where := fmt.Sprintf("%s[%d]", key, i)
			if m := mapping(c, where, d); m != nil {
				c.unknownKeys(where, m, deleteKeys)
				c.str(where+".uid", m["uid"], true)
			}
		}
	}
	sort.Strings(c.problems)
	return c.problems
}

func (c *alertingCheck) ambiguousScalars(n *yaml.Node, where string) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.Tag == "!!str" && yaml11Ambiguous.MatchString(n.Value) {
		c.add(fmt.Sprintf("line %d", n.Line), "plain %q reads differently in YAML 1.1 and 1.2: quote it", n.Value)
	}
	for _, child := range n.Content {
		c.ambiguousScalars(child, where)
	}
}

func (c *alertingCheck) unknownKeys(where string, m map[string]any, known map[string]bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] {
			c.add(where, "unexpected field '%s' (Grafana ignores it)", k)
		}
	}
}

func list(c *alertingCheck, where string, v any) []any {
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		c.add(where, "must be a list, got %T", v)
	}
	return items
}

func mapping(c *alertingCheck, where string, v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.add(where, "must be a mapping, got %T", v)
		return nil
	}
	return m
}

func (c *alertingCheck) str(where string, v any, required bool) string {
	if v == nil {
		if required {
			c.add(where, "required field is missing")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		c.add(where, "must be a string, got %T %v", v, v)
		return ""
	}
	if required && strings.TrimSpace(s) == "" {
		c.add(where, "must not be empty")
	}
	return s
}

func (c *alertingCheck) duration(where string, v any, required bool) {
	s := c.str(where, v, required)
	if s != "" && (!promDuration.MatchString(s) || s == "") {
		c.add(where, "%q is not a duration (e.g. 30s, 5m, 1h30m)", s)
	}
}

func durationSeconds(s string) int64 {
	m := promDuration.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	units := []int64{365 * 86400, 7 * 86400, 86400, 3600, 60, 1}
	var total int64
	for i, u := range units {
		if n, err := strconv.ParseInt(m[2+2*i], 10, 64); err == nil {
			total += n * u
		}
	}
	return total
}

func (c *alertingCheck) group(where string, v any, uids, titles map[string]string) {
	g := mapping(c, where, v)
	if g == nil {
		return
	}
	c.unknownKeys(where, g, groupKeys)
	orgID := 1
	if g["orgId"] != nil {
		n, ok := g["orgId"].(int)
		if !ok || n < 1 {
			c.add(where+".orgId", "must be an organization id (a whole number from 1), got %v", g["orgId"])
		}
		orgID = n
	}
	name := c.str(where+".name", g["name"], true)
	folder := c.str(where+".folder", g["folder"], true)
	c.duration(where+".interval", g["interval"], true)
	if s, _ := g["interval"].(string); s != "" {
		if secs := durationSeconds(s); secs <= 0 || secs%10 != 0 {
			c.add(where+".interval", "%q: Grafana evaluates on multiples of its 10s base interval", s)
		}
	}
	rules := list(c, where+".rules", g["rules"])
	if len(rules) == 0 {
		c.add(where+".rules", "a group needs at least one rule")
	}
	for i, r := range rules {
		c.rule(fmt.Sprintf("%s.rules[%d]", where, i), r, orgID, name, folder, uids, titles)
	}
}

func (c *alertingCheck) rule(where string, v any, orgID int, group, folder string, uids, titles map[string]string) {
	r := mapping(c, where, v)
	if r == nil {
		return
	}
	c.unknownKeys(where, r, ruleKeys)
	uid := c.str(where+".uid", r["uid"], true)
	title := c.str(where+".title", r["title"], true)
	if uid != "" {
		where = fmt.Sprintf("%s (%s)", where, uid)
		if !ruleUID.MatchString(uid) {
			c.add(where+".uid", "at most 40 of letters, digits, - and _")
		}
		if other, seen := uids[uid]; seen {
			c.add(where+".uid", "also the uid of %s", other)
		}
		uids[uid] = where
	}
	if other, seen := titles[folder+"/"+title]; seen && title != "" {
		c.add(where+".title", "also the title of %s in folder %q", other, folder)
	}
	titles[folder+"/"+title] = where

	// The provisioning API's model of the rule: the file's keys under their API names.
	api := map[string]any{"folderUID": folder, "ruleGroup": group, "orgID": orgID}
	for _, key := range []string{"uid", "title", "condition", "data", "for", "noDataState", "execErrState",
		"labels", "isPaused", "notification_settings", "record"} {
		if val, ok := r[key]; ok {
			api[key] = val
		}
	}
	// Grafana 12.4+ refuses the whole rules file when a rule names the contact point it no longer creates.
	if settings, ok := r["notification_settings"].(map[string]any); ok && settings["receiver"] == defaultEmail {
		c.add(where+".notification_settings.receiver", noDefaultEmail)
	}
	if val, ok := r["keepFiringFor"]; ok {
		api["keep_firing_for"] = val
	}
	if val, ok := r["missing_series_evals_to_resolve"]; ok {
		api["missingSeriesEvalsToResolve"] = val
	}
	annotations := map[string]any{}
	if a, ok := r["annotations"].(map[string]any); ok {
		for k, val := range a {
			annotations[k] = val
		}
	} else if r["annotations"] != nil {
		c.add(where+".annotations", "must be a mapping of strings")
	}
	if r["dasboardUid"] != nil {
		c.add(where+".dasboardUid", "the misspelt key Grafana still reads: write dashboardUid")
	}
	if dash := c.str(where+".dashboardUid", r["dashboardUid"], false); dash != "" {
		annotations["__dashboardUid__"] = dash
		id, ok := r["panelId"].(int)
		if !ok || id < 1 {
			c.add(where+".panelId", "a rule linked to a dashboard needs a panel id (a whole number), got %v", r["panelId"])
		}
		annotations["__panelId__"] = strconv.Itoa(id)
	} else if r["panelId"] != nil {
		c.add(where+".panelId", "a panel id without dashboardUid links nowhere")
	}
	api["annotations"] = annotations
	encoded, err := json.Marshal(api)
	if err != nil {
		c.add(where, "cannot be encoded: %v", err)
		return
	}
	decoded := &alerting.Rule{}
	c.sdk(where, decoded.UnmarshalJSONStrict(encoded))
	c.sdk(where, decoded.Validate())

	switch alerting.RuleNoDataState(fmt.Sprint(r["noDataState"])) {
	case alerting.RuleNoDataStateOK, alerting.RuleNoDataStateAlerting, alerting.RuleNoDataStateNoData,
		alerting.RuleNoDataStateKeepLast:
	default:
		c.add(where+".noDataState", "%v is not one of OK, Alerting, NoData, KeepLast", r["noDataState"])
	}
	switch alerting.RuleExecErrState(fmt.Sprint(r["execErrState"])) {
	case alerting.RuleExecErrStateOK, alerting.RuleExecErrStateAlerting, alerting.RuleExecErrStateError,
		alerting.RuleExecErrStateKeepLast:
	default:
		c.add(where+".execErrState", "%v is not one of OK, Alerting, Error, KeepLast", r["execErrState"])
	}
	c.duration(where+".for", r["for"], true)
	c.duration(where+".keepFiringFor", r["keepFiringFor"], false)

	refs := c.queries(where, r["data"])
	condition, _ := r["condition"].(string)
	if _, ok := refs[condition]; !ok && condition != "" {
		c.add(where+".condition", "%q is not the refId of one of the rule's queries or expressions", condition)
	}
	labels, _ := r["labels"].(map[string]any)
	for k, val := range labels {
		s, ok := val.(string)
		if !ok {
			c.add(where+".labels."+k, "must be a string, got %T", val)
			continue
		}
		c.template(where+".labels."+k, s, refs)
		if strings.Contains(s, "$") && !strings.Contains(s, "{{") {
			c.add(where+".labels."+k, "a $ outside a template: provisioning replaces $NAME with the environment")
		}
	}
	for k, val := range annotations {
		if s, ok := val.(string); ok && !strings.HasPrefix(k, "__") {
			c.template(where+".annotations."+k, s, refs)
			if strings.Contains(s, "${") {
				c.add(where+".annotations."+k, "${...}: provisioning replaces it with an environment variable")
			}
		}
	}
	if strings.Contains(title, "$") {
		c.add(where+".title", "a $ in a title: provisioning replaces $NAME with the environment")
	}
}

// queries checks the rule's data and returns refId -> true for each one present.
func (c *alertingCheck) queries(where string, v any) map[string]bool {
	refs := map[string]bool{}
	items := list(c, where+".data", v)
	if len(items) == 0 {
		c.add(where+".data", "a rule needs at least one query")
	}
	type expression struct {
		where string
		model map[string]any
	}
	var expressions []expression
	for i, item := range items {
		at := fmt.Sprintf("%s.data[%d]", where, i)
		q := mapping(c, at, item)
		if q == nil {
			continue
		}
		ref := c.str(at+".refId", q["refId"], true)
		if refs[ref] {
			c.add(at+".refId", "%q is used twice", ref)
		}
		refs[ref] = true
		at = fmt.Sprintf("%s (%s)", at, ref)
		model, _ := q["model"].(map[string]any)
		if model == nil {
			c.add(at+".model", "required mapping is missing")
			continue
		}
		if model["refId"] != nil && model["refId"] != ref {
			c.add(at+".model.refId", "%v differs from the query's refId %q", model["refId"], ref)
		}
		dsUID := c.str(at+".datasourceUid", q["datasourceUid"], true)
		ds, _ := model["datasource"].(map[string]any)
		if ds == nil {
			c.add(at+".model.datasource", "required {type, uid} is missing: the SDK cannot tell the model's type")
			continue
		}
		if ds["uid"] != dsUID {
			c.add(at+".model.datasource.uid", "%v differs from datasourceUid %q", ds["uid"], dsUID)
		}
		switch ds["type"] {
		case "__expr__":
			if dsUID != "__expr__" {
				c.add(at+".datasourceUid", "an expression's datasourceUid is __expr__")
			}
			expressions = append(expressions, expression{at, model})
		case "influxdb":
			c.influxQuery(at, q, model)
		case "prometheus":
			c.promQuery(at, q, model)
		default:
			c.add(at+".model.datasource.type", "%v: only __expr__, influxdb and prometheus models are checked here", ds["type"])
		}
	}
	for _, e := range expressions {
		c.expression(e.where, e.model, refs)
	}
	return refs
}

func (c *alertingCheck) influxQuery(where string, q, model map[string]any) {
	c.unknownKeys(where+".model", model, influxModelKeys)
	rt, _ := q["relativeTimeRange"].(map[string]any)
	from, okFrom := rt["from"].(int)
	to, okTo := rt["to"].(int)
	if rt == nil || !okFrom || !okTo || from <= to || to < 0 {
		c.add(where+".relativeTimeRange", "a datasource query needs {from, to}: whole seconds before now, from > to >= 0")
	}
	if raw, ok := model["rawQuery"].(bool); !ok || !raw {
		c.add(where+".model.rawQuery", "must be true: without it Grafana builds a query from the builder fields and ignores query")
	}
	query := c.str(where+".model.query", model["query"], true)
	if strings.Contains(query, "$__interval") || strings.Contains(query, "$interval") {
		c.add(where+".model.query", "$__interval in an alert query is the query's intervalMs, not a panel's interval: write the duration")
	}
	if !strings.Contains(query, "$timeFilter") {
		c.add(where+".model.query", "no $timeFilter: the query ignores the rule's relativeTimeRange")
	}
	if rf := model["resultFormat"]; rf != nil && rf != "time_series" && rf != "table" && rf != "logs" {
		c.add(where+".model.resultFormat", "%v is not time_series, table or logs", rf)
	}
	for _, key := range []string{"alias", "policy", "measurement", "orderByTime", "limit", "slimit", "tz"} {
		if model[key] != nil {
			c.str(where+".model."+key, model[key], false)
		}
	}
	if h, ok := model["hide"]; ok {
		if _, isBool := h.(bool); !isBool {
			c.add(where+".model.hide", "must be true or false")
		}
	}
}

func (c *alertingCheck) promQuery(where string, q, model map[string]any) {
	c.unknownKeys(where+".model", model, promModelKeys)
	rt, _ := q["relativeTimeRange"].(map[string]any)
	from, okFrom := rt["from"].(int)
	to, okTo := rt["to"].(int)
	if rt == nil || !okFrom || !okTo || from <= to || to < 0 {
		c.add(where+".relativeTimeRange", "a datasource query needs {from, to}: whole seconds before now, from > to >= 0")
	}
	expr := c.str(where+".model.expr", model["expr"], true)
	if strings.Contains(expr, "$__interval") || strings.Contains(expr, "$__rate_interval") {
		c.add(where+".model.expr", "$__interval in an alert query is the query's intervalMs, not a panel's interval: write the duration or $__range")
	}
	for _, key := range []string{"instant", "range", "exemplar", "hide"} {
		if v, ok := model[key]; ok {
			if _, isBool := v.(bool); !isBool {
				c.add(where+".model."+key, "must be true or false")
			}
		}
	}
	if model["instant"] == true && model["range"] == true {
		c.add(where+".model", "instant and range both: two frames per series, which the rule's reduce reads as duplicates")
	}
	for _, key := range []string{"editorMode", "legendFormat", "format", "interval", "queryType"} {
		if model[key] != nil {
			c.str(where+".model."+key, model[key], false)
		}
	}
}

func (c *alertingCheck) expression(where string, model map[string]any, refs map[string]bool) {
	// The SDK decodes the model strictly by its type with the rule (alerting.Rule's data).
	kind, _ := model["type"].(string)
	needs := func(ref string) {
		if !refs[ref] {
			c.add(where+".model.expression", "%q is not the refId of one of the rule's queries or expressions", ref)
		}
	}
	switch kind {
	case "reduce":
		needs(fmt.Sprint(model["expression"]))
		switch expr.TypeReduceReducer(fmt.Sprint(model["reducer"])) {
		case expr.TypeReduceReducerSum, expr.TypeReduceReducerMean, expr.TypeReduceReducerMin,
			expr.TypeReduceReducerMax, expr.TypeReduceReducerCount, expr.TypeReduceReducerLast,
			expr.TypeReduceReducerMedian:
		default:
			c.add(where+".model.reducer", "%v is not a reducer Grafana knows", model["reducer"])
		}
		if s, ok := model["settings"].(map[string]any); ok {
			switch expr.ExprTypeReduceSettingsMode(fmt.Sprint(s["mode"])) {
			case expr.ExprTypeReduceSettingsModeDropNN, expr.ExprTypeReduceSettingsModeReplaceNN:
			default:
				c.add(where+".model.settings.mode", "%v is not dropNN or replaceNN (strict: leave settings out)", s["mode"])
			}
		}
	case "threshold":
		needs(fmt.Sprint(model["expression"]))
		conditions, _ := model["conditions"].([]any)
		if len(conditions) != 1 {
			c.add(where+".model.conditions", "a threshold has exactly one condition, got %d", len(conditions))
		}
		for i, cond := range conditions {
			condition, _ := cond.(map[string]any)
			ev, _ := condition["evaluator"].(map[string]any)
			params, _ := ev["params"].([]any)
			want := 1
			switch expr.ExprTypeThresholdConditionsEvaluatorType(fmt.Sprint(ev["type"])) {
			case expr.ExprTypeThresholdConditionsEvaluatorTypeGt, expr.ExprTypeThresholdConditionsEvaluatorTypeLt:
			case expr.ExprTypeThresholdConditionsEvaluatorTypeWithinRange,
				expr.ExprTypeThresholdConditionsEvaluatorTypeOutsideRange:
				want = 2
			default:
				c.add(fmt.Sprintf("%s.model.conditions[%d].evaluator.type", where, i),
					"%v: only gt, lt, within_range and outside_range are in every Grafana 12 release", ev["type"])
			}
			if len(params) != want {
				c.add(fmt.Sprintf("%s.model.conditions[%d].evaluator.params", where, i), "needs %d number(s), got %v", want, ev["params"])
			}
		}
	case "math":
		text, _ := model["expression"].(string)
		found := mathRef.FindAllStringSubmatch(text, -1)
		if len(found) == 0 {
			c.add(where+".model.expression", "%q refers to no query", text)
		}
		for _, m := range found {
			needs(m[1] + m[2])
			if m[2] != "" && !letters.MatchString(m[2]) {
				c.add(where+".model.expression", "$%s: Grafana 11 reads a $name only up to its first character that is not a letter: write ${%s}", m[2], m[2])
			}
		}
	case "classic_conditions", "resample", "sql":
		// Decoded strictly by the SDK above; their references are not followed here.
	default:
		c.add(where+".model.type", "%v is not an expression type", model["type"])
	}
}

// Grafana's functions for annotation and label templates (its template
// reference: Prometheus' functions plus externalURL and pathPrefix), as stubs
// of the same names and arities: a template that calls anything else, or
// refers to a refId the rule does not have, fails here.
var templateFuncs = template.FuncMap{
	"humanize": num, "humanize1024": num, "humanizeDuration": num, "humanizePercentage": num,
	"humanizeTimestamp": num, "toTime": num,
	"title": text, "toUpper": text, "toLower": text, "stripPort": text, "stripDomain": text,
	"match":        func(pattern, s string) (bool, error) { _, err := regexp.Compile(pattern); return false, err },
	"reReplaceAll": func(pattern, repl, s string) (string, error) { _, err := regexp.Compile(pattern); return s, err },
	"graphLink":    text, "tableLink": text, "parseDuration": func(s string) float64 { return 0 },
	"args":     func(a ...any) map[string]any { return map[string]any{} },
	"safeHtml": text, "externalURL": func() string { return "http://grafana.example/" },
	"pathPrefix": func() string { return "" },
}

func num(v any) (string, error) {
	switch v.(type) {
	case float64, int, string:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("a number or string, got %T", v)
}

func text(s string) string { return s }

type templateValue struct {
	Labels map[string]string
	Value  float64
}

func (c *alertingCheck) template(where, body string, refs map[string]bool) {
	// Grafana runs every annotation and label with these three variables defined first.
	const prefix = "{{- $labels := .Labels -}}{{- $values := .Values -}}{{- $value := .Value -}}"
	t, err := template.New(where).Option("missingkey=zero").Funcs(templateFuncs).Parse(prefix + body)
	if err != nil {
		c.add(where, "template does not parse: %v", err)
		return
	}
	values := map[string]*templateValue{}
	for ref := range refs {
		values[ref] = &templateValue{Labels: map[string]string{}, Value: 0.5}
	}
	data := struct {
		Labels map[string]string
		Values map[string]*templateValue
		Value  string
	}{map[string]string{"applicationid": "app-1", "executorid": "1"}, values, "[ var='A' value=0.5 ]"}
	var out strings.Builder
	if err := t.Execute(&out, data); err != nil {
		c.add(where, "template fails: %v", err)
	}
}

func (c *alertingCheck) contactPoint(where string, v any, receivers map[string]bool) {
	cp := mapping(c, where, v)
	if cp == nil {
		return
	}
	c.unknownKeys(where, cp, contactPointKeys)
	name := c.str(where+".name", cp["name"], true)
	receivers[name] = true
	items := list(c, where+".receivers", cp["receivers"])
	if len(items) == 0 {
		c.add(where+".receivers", "a contact point needs at least one receiver")
	}
	for i, item := range items {
		at := fmt.Sprintf("%s.receivers[%d]", where, i)
		r := mapping(c, at, item)
		if r == nil {
			continue
		}
		c.unknownKeys(at, r, receiverKeys)
		api := map[string]any{"name": name}
		for _, key := range []string{"uid", "type", "settings", "disableResolveMessage"} {
			if val, ok := r[key]; ok {
				api[key] = val
			}
		}
		encoded, _ := json.Marshal(api)
		decoded := &alerting.ContactPoint{}
		c.sdk(at, decoded.UnmarshalJSONStrict(encoded))
		uid := c.str(at+".uid", r["uid"], true)
		if uid != "" && !ruleUID.MatchString(uid) {
			c.add(at+".uid", "at most 40 of letters, digits, - and _")
		}
		settings, _ := r["settings"].(map[string]any)
		required := map[alerting.ContactPointType][]string{
			alerting.ContactPointTypeWebhook: {"url"},
			alerting.ContactPointTypeEmail:   {"addresses"},
			alerting.ContactPointTypeSlack:   {"url"},
		}
		keys, known := required[alerting.ContactPointType(fmt.Sprint(r["type"]))]
		if !known {
			c.add(at+".type", "%v: only webhook, email and slack are checked here", r["type"])
		}
		for _, key := range keys {
			if s, _ := settings[key].(string); strings.TrimSpace(s) == "" {
				c.add(at+".settings."+key, "required: Grafana refuses to start with it missing or empty")
			}
		}
	}
}

// Grafana 12.4 and later create no default contact point (open-telemetry/opentelemetry-demo#3288:
// "receiver grafana-default-email does not exist" stops provisioning), so naming it needs a file
// that provisions it.
const (
	defaultEmail   = "grafana-default-email"
	noDefaultEmail = "grafana-default-email does not exist in Grafana 12.4 and later: provision a contact " +
		"point of that name in this file, or name one it provisions"
)

func (c *alertingCheck) policy(where string, v any, receivers map[string]bool) {
	p := mapping(c, where, v)
	if p == nil {
		return
	}
	api := map[string]any{}
	for k, val := range p {
		if k != "orgId" {
			api[k] = val
		}
	}
	encoded, _ := json.Marshal(api)
	decoded := &alerting.NotificationPolicy{}
	c.sdk(where, decoded.UnmarshalJSONStrict(encoded))
	receiver, _ := p["receiver"].(string)
	if receiver == "" {
		c.add(where+".receiver", "the root policy needs a receiver")
	} else if receiver == defaultEmail && !receivers[receiver] {
		c.add(where+".receiver", noDefaultEmail)
	} else if !receivers[receiver] {
		c.add(where+".receiver", "%q is no contact point of this file", receiver)
	}
}
