// Command dashboardcheck checks the Cloud Monitoring dashboards of a
// Terraform plan against the Dashboard API, which terraform plan does not:
// google_monitoring_dashboard takes its dashboard as one JSON string, and
// a wrong field, enum value or aggregation fails only at apply time, or
// not at all (a chart that stays empty).
//
// It reads the output of `terraform show -json PLANFILE` and, for each
// google_monitoring_dashboard in it:
//
//   - decodes dashboard_json strictly into the API's own message
//     (cloud.google.com/go/monitoring/dashboard/apiv1/dashboardpb): an
//     unknown field, an unknown enum value or a malformed duration is an
//     error, as it is for the API;
//   - finds values the API drops (0, false, "", []), which the provider
//     then reports as a change on every plan;
//   - checks the mosaic layout: tiles inside the columns, charts not
//     overlapping, each chart inside one collapsible group;
//   - checks every time series query: the metric exists (a log-based metric
//     of the plan, or a built-in metric listed in metrics.go), the labels
//     filtered and grouped on are the metric's or its resource's, and the
//     aligner and reducer suit the metric's kind and value type; a PromQL
//     query names log-based metrics by their PromQL names.
//
// Usage: dashboardcheck PLAN.json (terraform show -json output; - for stdin).
// The exit status is 1 when a dashboard has a problem, 2 when the plan
// cannot be read.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboardcheck PLAN.json  (terraform show -json output; - for stdin)")
		os.Exit(2)
	}
	var in io.Reader = os.Stdin
	if os.Args[1] != "-" {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "dashboardcheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	p, err := readPlan(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardcheck:", err)
		os.Exit(2)
	}
	if len(p.Dashboards) == 0 {
		fmt.Fprintln(os.Stderr, "dashboardcheck: the plan has no google_monitoring_dashboard")
		os.Exit(1)
	}
	failed := false
	for _, d := range p.Dashboards {
		rep := checkDashboard(d.JSON, p.LogMetrics)
		if len(rep.Problems) > 0 {
			failed = true
			for _, problem := range rep.Problems {
				fmt.Printf("dashboardcheck: %s: %s\n", d.Address, problem)
			}
			continue
		}
		fmt.Printf("dashboardcheck: %s: ok (%d tiles, %d queries, metrics: %s)\n", d.Address, rep.Tiles, rep.Queries, rep.metricList())
	}
	if failed {
		os.Exit(1)
	}
}
