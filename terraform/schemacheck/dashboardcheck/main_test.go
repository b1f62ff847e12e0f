package main

import (
	"strings"
	"testing"
)

// good is a small dashboard of the shape dashboard.tf builds: a group,
// a chart of a log-based distribution, a chart of a built-in counter and a
// PromQL chart.
const good = `{
  "displayName": "dsdelta (test)",
  "mosaicLayout": {
    "columns": 48,
    "tiles": [
      {"width": 48, "height": 16, "widget": {"title": "Tables", "collapsibleGroup": {}}},
      {"width": 16, "height": 16, "widget": {"title": "Lag", "xyChart": {
        "dataSets": [{"plotType": "LINE", "minAlignmentPeriod": "300s", "timeSeriesQuery": {"timeSeriesFilter": {
          "filter": "metric.type=\"logging.googleapis.com/user/dsdelta/merge_lag\" AND resource.type=\"cloud_run_revision\"",
          "aggregation": {"alignmentPeriod": "300s", "perSeriesAligner": "ALIGN_PERCENTILE_99", "crossSeriesReducer": "REDUCE_MAX", "groupByFields": ["metric.label.table"]}}}}],
        "thresholds": [{"label": "alert", "value": 900}],
        "yAxis": {"label": "seconds", "scale": "LINEAR"}}}},
      {"xPos": 16, "width": 16, "height": 16, "widget": {"title": "Failed", "xyChart": {
        "dataSets": [{"plotType": "STACKED_BAR", "timeSeriesQuery": {"timeSeriesFilter": {
          "filter": "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.label.service_name=one_of(\"a\",\"b\") AND metric.label.response_code_class=one_of(\"4xx\",\"5xx\")",
          "aggregation": {"alignmentPeriod": "60s", "perSeriesAligner": "ALIGN_SUM", "crossSeriesReducer": "REDUCE_SUM", "groupByFields": ["resource.label.service_name"]}}}}]}}},
      {"xPos": 32, "width": 16, "height": 16, "widget": {"title": "Events", "xyChart": {
        "dataSets": [{"plotType": "STACKED_AREA", "timeSeriesQuery": {
          "prometheusQuery": "sum by (table) (rate(logging_googleapis_com:user_dsdelta_merged_events_sum{monitored_resource=\"cloud_run_revision\"}[5m])) * 60"}}]}}}
    ]
  }
}`

var testMetrics = map[string]metric{
	"dsdelta/merge_lag":     {Kind: "DELTA", Value: "DISTRIBUTION", Labels: labels("table")},
	"dsdelta/merged_events": {Kind: "DELTA", Value: "DISTRIBUTION", Labels: labels("table")},
	"dsdelta/staged_files":  {Kind: "DELTA", Value: "INT64", Labels: labels("table")},
}

func TestCheckDashboard(t *testing.T) {
	tests := []struct {
		name string
		old  string // replaced in good by new; "" checks good itself
		new  string
		want string // a problem containing this; "" for none
	}{
		{name: "a well-formed dashboard passes"},
		{name: "an unknown field is refused as the API refuses it", old: `"timeSeriesFilter": {`, new: `"timeSeriesFilters": {`, want: "unknown field"},
		{name: "an unknown enum value is refused", old: `"ALIGN_PERCENTILE_99"`, new: `"ALIGN_P99"`, want: "invalid value for enum"},
		{name: "a duration without its unit suffix is refused", old: `"alignmentPeriod": "60s"`, new: `"alignmentPeriod": "60"`, want: "not a Dashboard"},
		{name: "an explicit zero position would diff on every plan", old: `{"xPos": 16,`, new: `{"xPos": 0, "yPos": 16,`, want: "is 0, which the API drops"},
		{name: "an empty list would diff on every plan", old: `"groupByFields": ["resource.label.service_name"]`, new: `"groupByFields": []`, want: "is [], which the API drops"},
		{name: "a false flag would diff on every plan", old: `"collapsibleGroup": {}`, new: `"collapsibleGroup": {"collapsed": false}`, want: "is false, which the API drops"},
		{name: "more than 48 columns are refused", old: `"columns": 48`, new: `"columns": 60`, want: "must be 1 to 48"},
		{name: "a tile past the last column is refused", old: `{"xPos": 32, "width": 16`, new: `{"xPos": 40, "width": 16`, want: "spans columns 40 to 56"},
		{name: "overlapping charts are refused", old: `{"xPos": 32, "width": 16`, new: `{"xPos": 24, "width": 16`, want: "overlap"},
		{name: "a chart outside every group is refused", old: `{"xPos": 32, "width": 16, "height": 16`, new: `{"xPos": 32, "yPos": 16, "width": 16, "height": 16`, want: "inside 0 collapsible groups"},
		{name: "a log-based metric the plan lacks is refused", old: `user/dsdelta/merge_lag`, new: `user/dsdelta/merge_lags`, want: `no google_logging_metric named "dsdelta/merge_lags"`},
		{name: "a built-in metric not in the table is refused", old: `run.googleapis.com/request_count`, new: `run.googleapis.com/request_counts`, want: "not in builtinMetrics"},
		{name: "grouping by a label the metric lacks is refused", old: `"groupByFields": ["metric.label.table"]`, new: `"groupByFields": ["metric.label.table_id"]`, want: `no metric label "table_id"`},
		{name: "filtering on a label the resource lacks is refused", old: `resource.label.service_name=one_of`, new: `resource.label.service=one_of`, want: `has no label "service"`},
		{name: "a log-based metric without its resource type is refused", old: `merge_lag\" AND resource.type=\"cloud_run_revision\"`, new: `merge_lag\"`, want: "name one (resource.type"},
		{name: "a built-in metric of another resource type is refused", old: `resource.type=\"cloud_run_revision\" AND resource.label.service_name`, new: `resource.type=\"pubsub_subscription\" AND resource.label.service_name`, want: `written for resource.type "cloud_run_revision"`},
		{name: "a percentile of a counter is refused", old: `"perSeriesAligner": "ALIGN_SUM"`, new: `"perSeriesAligner": "ALIGN_PERCENTILE_99"`, want: "ALIGN_PERCENTILE_99 does not apply"},
		{name: "a maximum across distributions is refused", old: `"ALIGN_PERCENTILE_99", "crossSeriesReducer": "REDUCE_MAX"`, new: `"ALIGN_DELTA", "crossSeriesReducer": "REDUCE_MAX"`, want: "REDUCE_MAX does not apply"},
		{name: "distributions drawn as lines are refused", old: `"ALIGN_PERCENTILE_99", "crossSeriesReducer": "REDUCE_MAX"`, new: `"ALIGN_DELTA", "crossSeriesReducer": "REDUCE_SUM"`, want: "the series are distributions"},
		{name: "a reducer without an aligner is refused", old: `"alignmentPeriod": "60s", "perSeriesAligner": "ALIGN_SUM", `, new: ``, want: "needs a perSeriesAligner"},
		{name: "an alignment period under a minute is refused", old: `"alignmentPeriod": "60s"`, new: `"alignmentPeriod": "30s"`, want: "below 60s"},
		{name: "PromQL naming an unknown log-based metric is refused", old: `user_dsdelta_merged_events_sum`, new: `user_dsdelta_merged_event_sum`, want: "no log-based metric of the plan"},
		{name: "PromQL summing a metric that is no distribution is refused", old: `user_dsdelta_merged_events_sum`, new: `user_dsdelta_staged_files_sum`, want: "no log-based metric of the plan"},
		{name: "PromQL without the monitored resource is refused", old: `{monitored_resource=\"cloud_run_revision\"}`, new: ``, want: "without monitored_resource"},
		{name: "PromQL aggregating by an unknown label is refused", old: `sum by (table)`, new: `sum by (tables)`, want: `by "tables"`},
		{name: "PromQL with unbalanced brackets is refused", old: `[5m]))`, new: `[5m])`, want: "unbalanced"},
		{name: "MQL is refused as deprecated", old: `"prometheusQuery": "sum by`, new: `"timeSeriesQueryLanguage": "sum by`, want: "deprecated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := good
			if tt.old != "" {
				if !strings.Contains(good, tt.old) {
					t.Fatalf("test case: %q is not in the good dashboard", tt.old)
				}
				raw = strings.Replace(good, tt.old, tt.new, 1)
			}
			rep := checkDashboard(raw, testMetrics)
			if tt.want == "" {
				if len(rep.Problems) > 0 {
					t.Fatalf("problems: %q", rep.Problems)
				}
				if rep.Tiles != 4 || rep.Queries != 3 {
					t.Fatalf("got %d tiles and %d queries, want 4 and 3", rep.Tiles, rep.Queries)
				}
				return
			}
			for _, p := range rep.Problems {
				if strings.Contains(p, tt.want) {
					return
				}
			}
			t.Fatalf("want a problem containing %q, got %q", tt.want, rep.Problems)
		})
	}
}

func TestPromNameMapsEveryOtherCharacterToUnderscore(t *testing.T) {
	for in, want := range map[string]string{
		"dsdelta/merged_events":      "logging_googleapis_com:user_dsdelta_merged_events",
		"dsdelta-prod/merged_events": "logging_googleapis_com:user_dsdelta_prod_merged_events",
	} {
		if got := promName(in); got != want {
			t.Errorf("promName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadPlanFindsDashboardsAndLogMetricsInModules(t *testing.T) {
	const planJSON = `{"planned_values": {"root_module": {
	  "resources": [
	    {"address": "google_monitoring_dashboard.d", "mode": "managed", "type": "google_monitoring_dashboard", "values": {"dashboard_json": "{}"}},
	    {"address": "data.google_project.p", "mode": "data", "type": "google_project", "values": {}}
	  ],
	  "child_modules": [{"resources": [
	    {"address": "module.m.google_logging_metric.l", "mode": "managed", "type": "google_logging_metric", "values": {
	      "name": "x/y", "metric_descriptor": [{"metric_kind": "DELTA", "value_type": "INT64", "labels": [{"key": "table"}]}]}}
	  ]}]}}}`
	p, err := readPlan(strings.NewReader(planJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Dashboards) != 1 || p.Dashboards[0].Address != "google_monitoring_dashboard.d" {
		t.Fatalf("dashboards: %+v", p.Dashboards)
	}
	m, ok := p.LogMetrics["x/y"]
	if !ok || m.Kind != "DELTA" || m.Value != "INT64" || !m.Labels["table"] {
		t.Fatalf("log metrics: %+v", p.LogMetrics)
	}
}

func TestReadPlanRefusesADashboardUnknownAtPlanTime(t *testing.T) {
	const planJSON = `{"planned_values": {"root_module": {"resources": [
	  {"address": "google_monitoring_dashboard.d", "mode": "managed", "type": "google_monitoring_dashboard", "values": {}}]}}}`
	if _, err := readPlan(strings.NewReader(planJSON)); err == nil || !strings.Contains(err.Error(), "not known at plan time") {
		t.Fatalf("got %v", err)
	}
}
