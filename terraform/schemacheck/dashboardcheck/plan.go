package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// plan is what dashboardcheck needs of a plan: its dashboards and the
// log-based metrics they may chart.
type plan struct {
	Dashboards []dashboard
	// LogMetrics are the plan's google_logging_metric resources by name.
	LogMetrics map[string]metric
}

// dashboard is a planned google_monitoring_dashboard.
type dashboard struct {
	Address string
	JSON    string
}

type planJSON struct {
	PlannedValues struct {
		RootModule moduleJSON `json:"root_module"`
	} `json:"planned_values"`
}

type moduleJSON struct {
	Resources []struct {
		Address string          `json:"address"`
		Mode    string          `json:"mode"`
		Type    string          `json:"type"`
		Values  json.RawMessage `json:"values"`
	} `json:"resources"`
	ChildModules []moduleJSON `json:"child_modules"`
}

type logMetricJSON struct {
	Name             string `json:"name"`
	MetricDescriptor []struct {
		MetricKind string `json:"metric_kind"`
		ValueType  string `json:"value_type"`
		Labels     []struct {
			Key string `json:"key"`
		} `json:"labels"`
	} `json:"metric_descriptor"`
}

// readPlan reads the output of terraform show -json for a saved plan.
func readPlan(r io.Reader) (plan, error) {
	var pj planJSON
	if err := json.NewDecoder(r).Decode(&pj); err != nil {
		return plan{}, fmt.Errorf("read plan JSON: %w", err)
	}
	p := plan{LogMetrics: map[string]metric{}}
	if err := p.add(pj.PlannedValues.RootModule); err != nil {
		return plan{}, err
	}
	return p, nil
}

func (p *plan) add(m moduleJSON) error {
	for _, r := range m.Resources {
		if r.Mode != "managed" {
			continue
		}
		switch r.Type {
		case "google_monitoring_dashboard":
			var v struct {
				DashboardJSON *string `json:"dashboard_json"`
			}
			if err := json.Unmarshal(r.Values, &v); err != nil {
				return fmt.Errorf("%s: %w", r.Address, err)
			}
			if v.DashboardJSON == nil {
				return fmt.Errorf("%s: dashboard_json is not known at plan time, so it cannot be checked", r.Address)
			}
			p.Dashboards = append(p.Dashboards, dashboard{Address: r.Address, JSON: *v.DashboardJSON})
		case "google_logging_metric":
			var v logMetricJSON
			if err := json.Unmarshal(r.Values, &v); err != nil {
				return fmt.Errorf("%s: %w", r.Address, err)
			}
			if v.Name == "" || len(v.MetricDescriptor) != 1 {
				return fmt.Errorf("%s: name or metric_descriptor not known at plan time", r.Address)
			}
			md := v.MetricDescriptor[0]
			m := metric{Kind: md.MetricKind, Value: md.ValueType, Resource: "", Labels: map[string]bool{}}
			for _, l := range md.Labels {
				m.Labels[l.Key] = true
			}
			p.LogMetrics[v.Name] = m
		}
	}
	for _, c := range m.ChildModules {
		if err := p.add(c); err != nil {
			return err
		}
	}
	return nil
}
