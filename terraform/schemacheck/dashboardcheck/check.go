package main

import (
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/monitoring/dashboard/apiv1/dashboardpb"
	"google.golang.org/protobuf/encoding/protojson"
)

// report is what checkDashboard found in one dashboard.
type report struct {
	Problems []string
	Tiles    int
	Queries  int
	// Metrics are the metric types the queries chart (PromQL names for
	// PromQL queries).
	Metrics map[string]bool
}

func (r *report) addf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *report) metricList() string {
	names := make([]string, 0, len(r.Metrics))
	for m := range r.Metrics {
		names = append(names, m)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkDashboard checks one dashboard's JSON; logMetrics are the plan's
// log-based metrics by name.
func checkDashboard(raw string, logMetrics map[string]metric) report {
	rep := report{Metrics: map[string]bool{}}
	dropped, err := droppedValues(raw)
	if err != nil {
		rep.addf("dashboard_json is not JSON: %v", err)
		return rep
	}
	rep.Problems = append(rep.Problems, dropped...)

	var d dashboardpb.Dashboard
	// Strict, as the API is: unknown fields and enum values are errors.
	if err := (protojson.UnmarshalOptions{}).Unmarshal([]byte(raw), &d); err != nil {
		rep.addf("not a Dashboard of the Monitoring API: %v", err)
		return rep
	}
	if d.GetDisplayName() == "" {
		rep.addf("displayName is required")
	}
	mosaic := d.GetMosaicLayout()
	if mosaic == nil {
		rep.addf("expected a mosaicLayout")
		return rep
	}
	checkLayout(mosaic, &rep)
	for i, t := range mosaic.GetTiles() {
		w := t.GetWidget()
		where := fmt.Sprintf("tile %d (%q)", i, w.GetTitle())
		if w.GetXyChart() != nil {
			checkXyChart(where, w.GetXyChart(), logMetrics, &rep)
		}
		if w.GetScorecard() != nil {
			checkQuery(where, w.GetScorecard().GetTimeSeriesQuery(), logMetrics, &rep)
		}
	}
	return rep
}
