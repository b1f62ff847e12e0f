package main

import (
	"regexp"
	"strings"
)

var (
	promUserMetricRe = regexp.MustCompile(`logging_googleapis_com:user_[A-Za-z0-9_]+`)
	promByRe         = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	promNonWordRe    = regexp.MustCompile(`[^A-Za-z0-9_]`)
	// promResourceRe matches the start of a selector that names its
	// monitored resource type.
	promResourceRe = regexp.MustCompile(`^\{[^}]*\bmonitored_resource\s*=\s*"([^"]+)"`)
)

// promName is a log-based metric's PromQL name: the first / of its metric
// type becomes :, every other character but letters, digits and _ becomes
// _ (cloud.google.com/monitoring/promql/promql-mapping).
func promName(logMetric string) string {
	return "logging_googleapis_com:user_" + promNonWordRe.ReplaceAllString(logMetric, "_")
}

// checkPromQL checks what can be checked of a PromQL query without a
// PromQL engine: brackets pair up, every log-based metric it names is one
// of the plan's (with _sum, _count or _bucket for a distribution), each
// selects its monitored resource type (log-based metrics can be written for
// several), and the labels it aggregates by are those metrics' or their
// resource's.
func checkPromQL(where, q string, logMetrics map[string]metric, rep *report) {
	if !balanced(q) {
		rep.addf("%s: unbalanced brackets in PromQL: %s", where, q)
	}
	known := map[string]metric{}
	for name, m := range logMetrics {
		base := promName(name)
		if m.Value == "DISTRIBUTION" {
			for _, suffix := range []string{"_sum", "_count", "_bucket"} {
				known[base+suffix] = m
			}
		} else {
			known[base] = m
		}
	}
	var used []metric
	resources := map[string]bool{}
	for _, loc := range promUserMetricRe.FindAllStringIndex(q, -1) {
		name := q[loc[0]:loc[1]]
		rep.Metrics[name] = true
		m, ok := known[name]
		if !ok {
			rep.addf("%s: PromQL names %s, which is no log-based metric of the plan (or lacks _sum/_count/_bucket, or has one on a metric that is no distribution)", where, name)
			continue
		}
		used = append(used, m)
		sel := q[loc[1]:]
		rt := promResourceRe.FindStringSubmatch(sel)
		if rt == nil {
			rep.addf("%s: PromQL selects %s without monitored_resource=\"...\": a log-based metric can be written for several resource types", where, name)
			continue
		}
		resources[rt[1]] = true
	}
	for _, by := range promByRe.FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(by[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || l == "le" || l == "monitored_resource" || resourceLabel(resources, l) {
				continue
			}
			for _, m := range used {
				if !m.Labels[l] {
					rep.addf("%s: PromQL aggregates by %q, which is no label of the metrics it selects", where, l)
					break
				}
			}
		}
	}
}

// resourceLabel reports whether l is a label of one of the resource types.
func resourceLabel(resources map[string]bool, l string) bool {
	for r := range resources {
		if resourceLabels[r][l] {
			return true
		}
	}
	return false
}

func balanced(s string) bool {
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	var stack []rune
	inString := false
	for _, r := range s {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}
