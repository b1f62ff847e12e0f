package main

import (
	"fmt"
	"regexp"
	"strings"

	"cloud.google.com/go/monitoring/dashboard/apiv1/dashboardpb"
)

var (
	metricTypeRe   = regexp.MustCompile(`metric\.type\s*=\s*"([^"]+)"`)
	resourceTypeRe = regexp.MustCompile(`resource\.type\s*=\s*"([^"]+)"`)
	labelRefRe     = regexp.MustCompile(`\b(metric|resource)\.labels?\.([A-Za-z_][A-Za-z0-9_]*)`)
)

// checkXyChart checks a chart's data sets: each query, and that a series
// still holding distributions is drawn as a heatmap (a line of
// distributions shows nothing useful: a reducer was forgotten).
func checkXyChart(where string, c *dashboardpb.XyChart, logMetrics map[string]metric, rep *report) {
	if c.GetDataSets() == nil {
		rep.addf("%s: an xyChart needs dataSets", where)
	}
	for i, ds := range c.GetDataSets() {
		at := fmt.Sprintf("%s dataSets[%d]", where, i)
		out := checkQuery(at, ds.GetTimeSeriesQuery(), logMetrics, rep)
		if out.Value == "DISTRIBUTION" && ds.GetPlotType() != dashboardpb.XyChart_DataSet_HEATMAP {
			rep.addf("%s: the series are distributions, plotted as %s: reduce them (e.g. REDUCE_PERCENTILE_99) or plot a HEATMAP", at, ds.GetPlotType())
		}
		if p := ds.GetMinAlignmentPeriod(); p != nil && p.AsDuration().Seconds() < 60 {
			rep.addf("%s: minAlignmentPeriod %s is below 60s", at, p.AsDuration())
		}
	}
}

// checkQuery checks one time series query and returns the kind and value
// type of the series it yields (Value "" when unknown).
func checkQuery(where string, q *dashboardpb.TimeSeriesQuery, logMetrics map[string]metric, rep *report) series {
	if q == nil {
		rep.addf("%s: no timeSeriesQuery", where)
		return series{}
	}
	rep.Queries++
	switch {
	case q.GetTimeSeriesFilter() != nil:
		f := q.GetTimeSeriesFilter()
		return checkFilter(where, f.GetFilter(), []*dashboardpb.Aggregation{f.GetAggregation(), f.GetSecondaryAggregation()}, logMetrics, rep)
	case q.GetTimeSeriesFilterRatio() != nil:
		r := q.GetTimeSeriesFilterRatio()
		for _, part := range []*dashboardpb.TimeSeriesFilterRatio_RatioPart{r.GetNumerator(), r.GetDenominator()} {
			checkFilter(where, part.GetFilter(), []*dashboardpb.Aggregation{part.GetAggregation()}, logMetrics, rep)
		}
		return series{"GAUGE", "DOUBLE"}
	case q.GetPrometheusQuery() != "":
		checkPromQL(where, q.GetPrometheusQuery(), logMetrics, rep)
		return series{"GAUGE", "DOUBLE"}
	case q.GetTimeSeriesQueryLanguage() != "":
		rep.addf("%s: MQL (timeSeriesQueryLanguage) is deprecated: use a timeSeriesFilter or PromQL", where)
	default:
		rep.addf("%s: the timeSeriesQuery has no source", where)
	}
	return series{}
}

// checkFilter checks a monitoring filter and its aggregations against the
// metric it names.
func checkFilter(where, filter string, aggs []*dashboardpb.Aggregation, logMetrics map[string]metric, rep *report) series {
	types := metricTypeRe.FindAllStringSubmatch(filter, -1)
	if len(types) != 1 {
		rep.addf("%s: the filter must name exactly one metric.type: %s", where, filter)
		return series{}
	}
	mt := types[0][1]
	rep.Metrics[mt] = true
	m, ok := lookupMetric(mt, logMetrics)
	if !ok {
		if name, isLog := strings.CutPrefix(mt, logMetricPrefix); isLog {
			rep.addf("%s: %s: the plan has no google_logging_metric named %q", where, mt, name)
		} else {
			rep.addf("%s: %s is not in builtinMetrics (metrics.go): add it from the Google Cloud metrics list", where, mt)
		}
		return series{}
	}
	res := m.Resource
	if rt := resourceTypeRe.FindStringSubmatch(filter); rt != nil {
		if m.Resource != "" && rt[1] != m.Resource {
			rep.addf("%s: %s is written for resource.type %q, the filter asks for %q", where, mt, m.Resource, rt[1])
		}
		res = rt[1]
	} else if m.Resource == "" {
		rep.addf("%s: %s: a log-based metric can be written for several resource types: name one (resource.type=...)", where, mt)
	}
	for _, ref := range labelRefRe.FindAllStringSubmatch(filter, -1) {
		checkLabel(where, mt, m, res, ref[1], ref[2], rep)
	}

	s := series{m.Kind, m.Value}
	for _, a := range aggs {
		if a == nil {
			continue
		}
		for _, field := range a.GetGroupByFields() {
			ref := labelRefRe.FindStringSubmatch(field)
			if ref == nil || ref[0] != field {
				rep.addf("%s: groupByFields %q is not metric.label.KEY or resource.label.KEY", where, field)
				continue
			}
			checkLabel(where, mt, m, res, ref[1], ref[2], rep)
		}
		s = checkAggregation(where, mt, s, a, rep)
	}
	return s
}

func lookupMetric(mt string, logMetrics map[string]metric) (metric, bool) {
	if name, ok := strings.CutPrefix(mt, logMetricPrefix); ok {
		m, ok := logMetrics[name]
		return m, ok
	}
	m, ok := builtinMetrics[mt]
	return m, ok
}

func checkLabel(where, mt string, m metric, resource, scope, key string, rep *report) {
	switch scope {
	case "metric":
		if !m.Labels[key] {
			rep.addf("%s: %s has no metric label %q", where, mt, key)
		}
	case "resource":
		known, ok := resourceLabels[resource]
		if !ok {
			rep.addf("%s: resource type %q is not in resourceLabels (metrics.go)", where, resource)
		} else if !known[key] {
			rep.addf("%s: resource type %q has no label %q", where, resource, key)
		}
	}
}

// checkAggregation checks an aggregation's aligner and reducer against the
// series they get and returns what they make of it.
func checkAggregation(where, mt string, s series, a *dashboardpb.Aggregation, rep *report) series {
	aligner, reducer := a.GetPerSeriesAligner(), a.GetCrossSeriesReducer()
	if aligner != dashboardpb.Aggregation_ALIGN_NONE {
		p := a.GetAlignmentPeriod()
		if p == nil {
			rep.addf("%s: %s needs an alignmentPeriod", where, aligner)
		} else if p.AsDuration().Seconds() < 60 {
			rep.addf("%s: alignmentPeriod %s is below 60s", where, p.AsDuration())
		}
	}
	if reducer != dashboardpb.Aggregation_REDUCE_NONE && aligner == dashboardpb.Aggregation_ALIGN_NONE {
		rep.addf("%s: %s needs a perSeriesAligner", where, reducer)
	}
	if reducer == dashboardpb.Aggregation_REDUCE_NONE && len(a.GetGroupByFields()) > 0 {
		rep.addf("%s: groupByFields without a crossSeriesReducer are ignored", where)
	}
	aligned, ok := align(s, aligner)
	if !ok {
		rep.addf("%s: %s does not apply to %s (%s %s)", where, aligner, mt, s.Kind, s.Value)
		return series{}
	}
	reduced, ok := reduce(aligned, reducer)
	if !ok {
		rep.addf("%s: %s does not apply to %s aligned by %s (%s)", where, reducer, mt, aligner, aligned.Value)
		return series{}
	}
	return reduced
}
