# The Cloud Monitoring dashboard (dashboard.tf) against the mocked google
# provider: it exists, its JSON parses, it has one collapsible group per
# concern, and its charts name the log-based metrics, built-in metrics and
# subscriptions of this configuration. The JSON's fields and aggregations
# are checked against the Monitoring API's own messages by
# schemacheck/dashboardcheck on every schemacheck plan; the log fields the
# metrics extract are those shared/pipeline logs (event="merged" with
# table, files, events and lag_seconds; event="staged" with table).

mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
  mock_data "google_storage_project_service_account" {
    defaults = {
      email_address = "service-123456789012@gs-project-accounts.iam.gserviceaccount.com"
    }
  }
  mock_resource "google_monitoring_dashboard" {
    defaults = {
      id = "projects/123456789012/dashboards/0f1e2d3c-dsdelta"
    }
  }
}

variables {
  project     = "dsdelta-test-project"
  enable_apis = false
}

run "dashboard_has_a_row_per_concern_on_a_48_column_mosaic" {
  command = plan

  assert {
    condition     = can(jsondecode(google_monitoring_dashboard.dsdelta.dashboard_json)) && google_monitoring_dashboard.dsdelta.project == "dsdelta-test-project"
    error_message = "The dashboard must exist in the project, and its JSON must parse."
  }
  assert {
    condition     = jsondecode(google_monitoring_dashboard.dsdelta.dashboard_json).displayName == "dsdelta (dsdelta)" && jsondecode(google_monitoring_dashboard.dsdelta.dashboard_json).mosaicLayout.columns == 48
    error_message = "The dashboard must be named after the deployment and laid out on a 48-column mosaic."
  }
  assert {
    condition = [for t in jsondecode(google_monitoring_dashboard.dsdelta.dashboard_json).mosaicLayout.tiles : t.widget.title if can(t.widget.collapsibleGroup)] == [
      "Tables: end-to-end lag and events merged",
      "Files: staged and merged, waiting, quarantined, reconciled",
      "Functions: merge duration, errors, instances and memory",
      "Dead letters",
    ]
    error_message = "The dashboard must have one collapsible group per concern, in this order."
  }
  assert {
    condition = alltrue([for t in jsondecode(google_monitoring_dashboard.dsdelta.dashboard_json).mosaicLayout.tiles :
      lookup(t, "xPos", 0) + t.width <= 48 && lookup(t, "xPos", 1) != 0 && lookup(t, "yPos", 1) != 0
    ])
    error_message = "Tiles must fit the 48 columns, and leave zero positions out (the API drops them, which the provider shows as a change on every plan)."
  }
}

run "dashboard_charts_the_log_based_metrics" {
  command = plan

  assert {
    condition = alltrue([for m in [
      google_logging_metric.merge_lag,
      google_logging_metric.quarantined_files,
      google_logging_metric.reconciled_files,
      google_logging_metric.function_errors,
    ] : strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "logging.googleapis.com/user/${m.name}")])
    error_message = "The dashboard must chart the lag, quarantine, reconcile and error log-based metrics by their metric types."
  }
  assert {
    condition = alltrue([for n in [
      "logging_googleapis_com:user_dsdelta_merged_events_sum",
      "logging_googleapis_com:user_dsdelta_merged_files_sum",
      "logging_googleapis_com:user_dsdelta_staged_files{",
    ] : strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, n)])
    error_message = "Events and files per minute must be read with PromQL from the merged_events and merged_files distributions' sums and the staged_files counter."
  }
  assert {
    condition = alltrue([for field in ["events", "files"] :
      google_logging_metric.merged[field].name == "dsdelta/merged_${field}" &&
      strcontains(google_logging_metric.merged[field].filter, "jsonPayload.event=\"merged\"") &&
      google_logging_metric.merged[field].value_extractor == "EXTRACT(jsonPayload.${field})" &&
      google_logging_metric.merged[field].metric_descriptor[0].value_type == "DISTRIBUTION" &&
      google_logging_metric.merged[field].label_extractors["table"] == "EXTRACT(jsonPayload.table)"
    ])
    error_message = "merged_events and merged_files must be distributions of the events and files of each merged batch, by table."
  }
  assert {
    condition = (
      strcontains(google_logging_metric.staged_files.filter, "jsonPayload.event=\"staged\"") &&
      strcontains(google_logging_metric.staged_files.filter, "resource.labels.service_name=\"dsdelta-onfile\"") &&
      google_logging_metric.staged_files.metric_descriptor[0].value_type == "INT64" &&
      google_logging_metric.staged_files.label_extractors["table"] == "EXTRACT(jsonPayload.table)"
    )
    error_message = "staged_files must count the staged events of the functions, by table."
  }
  assert {
    condition     = strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "\"value\":${var.merge_lag_alert_seconds}")
    error_message = "The lag chart must draw the merge lag alert's threshold."
  }
}

run "dashboard_charts_the_functions_and_dead_letters" {
  command = plan

  assert {
    condition = alltrue([for m in [
      "run.googleapis.com/request_latencies",
      "run.googleapis.com/request_count",
      "run.googleapis.com/container/instance_count",
      "run.googleapis.com/container/memory/utilizations",
      "pubsub.googleapis.com/subscription/dead_letter_message_count",
      "pubsub.googleapis.com/subscription/num_undelivered_messages",
      "pubsub.googleapis.com/subscription/oldest_unacked_message_age",
    ] : strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "metric.type=\\\"${m}\\\"")])
    error_message = "The dashboard must chart the functions' latency, requests, instances and memory, and the subscriptions' dead letters and backlog."
  }
  assert {
    condition     = strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "resource.label.service_name=one_of(\\\"dsdelta-compact\\\",\\\"dsdelta-merge\\\",\\\"dsdelta-onfile\\\")")
    error_message = "The function charts must select the three functions' Cloud Run services."
  }
  assert {
    condition = alltrue([for s in [
      google_pubsub_subscription.onfile[0].name,
      google_pubsub_subscription.onfile_reconcile.name,
      google_pubsub_subscription.merge.name,
      google_pubsub_subscription.compact.name,
      google_pubsub_subscription.dead_letter.name,
    ] : strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "\\\"${s}\\\"")])
    error_message = "The dead-letter charts must cover every push subscription and the dead-letter hold subscription."
  }
}

run "eventarc_mode_dashboard_leaves_out_the_notification_subscription" {
  command = plan

  variables {
    trigger_mode = "eventarc"
  }

  assert {
    condition     = !strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "dsdelta-onfile-push") && strcontains(google_monitoring_dashboard.dsdelta.dashboard_json, "dsdelta-onfile-reconcile-push")
    error_message = "In eventarc mode there is no onfile push subscription to chart; the reconcile subscription stays."
  }
}

run "dashboard_url_opens_the_dashboard_in_the_console" {
  command = apply

  assert {
    condition     = output.dashboard_url == "https://console.cloud.google.com/monitoring/dashboards/builder/0f1e2d3c-dsdelta?project=dsdelta-test-project"
    error_message = "dashboard_url must open the dashboard by its id in the project."
  }
}
