package main

import (
	"strings"

	"cloud.google.com/go/monitoring/dashboard/apiv1/dashboardpb"
)

// metric is what a query may do with a metric type: its kind (GAUGE,
// DELTA, CUMULATIVE), value type (INT64, DOUBLE, DISTRIBUTION, BOOL), the
// monitored resource type it is written for ("" for any: log-based
// metrics) and its labels.
type metric struct {
	Kind, Value string
	Resource    string
	Labels      map[string]bool
}

// logMetricPrefix starts the metric type of a log-based metric.
const logMetricPrefix = "logging.googleapis.com/user/"

// builtinMetrics are the built-in metrics the dashboards may chart, as the
// Google Cloud metrics list gives them (cloud.google.com/monitoring/api/metrics_gcp:
// the run and pubsub sections). A metric missing here is reported: look it
// up there and add it with its kind, value type, resource and labels.
var builtinMetrics = map[string]metric{
	"run.googleapis.com/request_count":                              {"DELTA", "INT64", "cloud_run_revision", labels("response_code", "response_code_class", "route")},
	"run.googleapis.com/request_latencies":                          {"DELTA", "DISTRIBUTION", "cloud_run_revision", labels("response_code", "response_code_class", "route")},
	"run.googleapis.com/container/instance_count":                   {"GAUGE", "INT64", "cloud_run_revision", labels("state", "container_name")},
	"run.googleapis.com/container/memory/utilizations":              {"DELTA", "DISTRIBUTION", "cloud_run_revision", labels("container_name")},
	"run.googleapis.com/container/cpu/utilizations":                 {"DELTA", "DISTRIBUTION", "cloud_run_revision", labels("container_name")},
	"run.googleapis.com/container/billable_instance_time":           {"DELTA", "DOUBLE", "cloud_run_revision", labels()},
	"pubsub.googleapis.com/subscription/num_undelivered_messages":   {"GAUGE", "INT64", "pubsub_subscription", labels()},
	"pubsub.googleapis.com/subscription/oldest_unacked_message_age": {"GAUGE", "INT64", "pubsub_subscription", labels()},
	"pubsub.googleapis.com/subscription/dead_letter_message_count":  {"DELTA", "INT64", "pubsub_subscription", labels()},
	"pubsub.googleapis.com/topic/send_request_count":                {"DELTA", "INT64", "pubsub_topic", labels("response_class", "response_code")},
}

// resourceLabels are the labels of the monitored resource types above
// (cloud.google.com/monitoring/api/resources).
var resourceLabels = map[string]map[string]bool{
	"cloud_run_revision":  labels("project_id", "service_name", "revision_name", "location", "configuration_name"),
	"pubsub_subscription": labels("project_id", "subscription_id"),
	"pubsub_topic":        labels("project_id", "topic_id"),
}

func labels(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// series is the kind and value type of a time series, as it goes through
// alignment and reduction. An empty Value is unknown: not checked further.
type series struct{ Kind, Value string }

func (s series) numeric() bool { return s.Value == "INT64" || s.Value == "DOUBLE" }

// align gives what a per-series aligner makes of s, or ok false when the
// aligner does not take such series (the Aligner reference of the
// Monitoring API: cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#aligner).
func align(s series, a dashboardpb.Aggregation_Aligner) (out series, ok bool) {
	name := a.String()
	if s.Value == "" {
		return s, true
	}
	switch {
	case a == dashboardpb.Aggregation_ALIGN_NONE:
		return s, true
	case a == dashboardpb.Aggregation_ALIGN_DELTA:
		return series{"DELTA", s.Value}, s.Kind != "GAUGE" && (s.numeric() || s.Value == "DISTRIBUTION")
	case a == dashboardpb.Aggregation_ALIGN_RATE:
		return series{"GAUGE", "DOUBLE"}, s.Kind != "GAUGE" && s.numeric()
	case a == dashboardpb.Aggregation_ALIGN_SUM:
		return series{"GAUGE", s.Value}, s.Kind != "CUMULATIVE" && (s.numeric() || s.Value == "DISTRIBUTION")
	case a == dashboardpb.Aggregation_ALIGN_MIN, a == dashboardpb.Aggregation_ALIGN_MAX:
		return series{"GAUGE", s.Value}, s.Kind != "CUMULATIVE" && s.numeric()
	case a == dashboardpb.Aggregation_ALIGN_MEAN:
		return series{"GAUGE", "DOUBLE"}, s.Kind != "CUMULATIVE" && (s.numeric() || s.Value == "DISTRIBUTION")
	case a == dashboardpb.Aggregation_ALIGN_COUNT:
		return series{"GAUGE", "INT64"}, s.Kind != "CUMULATIVE" && (s.numeric() || s.Value == "BOOL")
	case strings.HasPrefix(name, "ALIGN_PERCENTILE_"):
		return series{"GAUGE", "DOUBLE"}, s.Kind != "CUMULATIVE" && s.Value == "DISTRIBUTION"
	}
	return series{}, true // not modelled: unknown from here on
}

// reduce gives what a cross-series reducer makes of aligned series s, or
// ok false when the reducer does not take them.
func reduce(s series, r dashboardpb.Aggregation_Reducer) (out series, ok bool) {
	name := r.String()
	if s.Value == "" {
		return s, true
	}
	switch {
	case r == dashboardpb.Aggregation_REDUCE_NONE:
		return s, true
	case r == dashboardpb.Aggregation_REDUCE_SUM:
		return s, s.numeric() || s.Value == "DISTRIBUTION"
	case r == dashboardpb.Aggregation_REDUCE_MEAN:
		return series{s.Kind, "DOUBLE"}, s.numeric() || s.Value == "DISTRIBUTION"
	case r == dashboardpb.Aggregation_REDUCE_MIN, r == dashboardpb.Aggregation_REDUCE_MAX:
		return s, s.numeric()
	case r == dashboardpb.Aggregation_REDUCE_COUNT:
		return series{s.Kind, "INT64"}, true
	case strings.HasPrefix(name, "REDUCE_PERCENTILE_"):
		return series{s.Kind, "DOUBLE"}, s.numeric() || s.Value == "DISTRIBUTION"
	}
	return series{}, true
}
