# Log-based metrics over the functions' structured JSON logs (Cloud Logging
# lifts `severity` and `message`; the other keys land in jsonPayload), and
# alert policies on them. Gen2 functions log as Cloud Run revisions of a
# service named like the function.

locals {
  functions_log_filter = join(" OR ", [for name in values(local.function_names) : "resource.labels.service_name=\"${name}\""])
  functions_logs       = "resource.type=\"cloud_run_revision\" AND (${local.functions_log_filter})"

  # One reconcile tick, for the reconciled-files alert's window: N minutes for
  # a reconcile_schedule of the form "*/N * * * *", else 10 minutes.
  reconcile_tick_seconds = min(3600, max(60, try(tonumber(regex("^\\*/([0-9]+)\\s+\\*\\s+\\*\\s+\\*\\s+\\*$", trimspace(var.reconcile_schedule))[0]) * 60, 600)))
}

resource "google_logging_metric" "quarantined_files" {
  project     = var.project
  name        = "${local.prefix}/quarantined_files"
  description = "Datastream files quarantined by dsdelta (permanently bad: undecodable, invalid, unmappable). Each needs a fix and `dsdelta replay`."
  filter      = "${local.functions_logs} AND jsonPayload.event=\"quarantined\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "dsdelta quarantined files"
    labels {
      key         = "table"
      value_type  = "STRING"
      description = "Source table id (db.table)."
    }
  }

  label_extractors = {
    "table" = "EXTRACT(jsonPayload.table)"
  }

  depends_on = [google_project_service.apis]
}

resource "google_logging_metric" "merge_lag" {
  project     = var.project
  name        = "${local.prefix}/merge_lag"
  description = "Seconds from a change's source commit to its Delta commit, logged by merge for every merged batch."
  filter      = "${local.functions_logs} AND jsonPayload.event=\"merged\" AND jsonPayload.lag_seconds>=0"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "s"
    display_name = "dsdelta merge lag"
    labels {
      key         = "table"
      value_type  = "STRING"
      description = "Source table id (db.table)."
    }
  }

  value_extractor = "EXTRACT(jsonPayload.lag_seconds)"
  label_extractors = {
    "table" = "EXTRACT(jsonPayload.table)"
  }

  # 0.5 s to about 6 days in 24 buckets, doubling.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 24
      growth_factor      = 2
      scale              = 0.5
    }
  }

  depends_on = [google_project_service.apis]
}

# Throughput, for the dashboard (dashboard.tf). Merge logs one
# event="merged" line per batch with its table, files and events; staging
# logs one event="staged" line per file it registers (shared/pipeline). A
# counter can only count lines, so the sums are distributions of the logged
# values, read with PromQL's _sum.
locals {
  # Keyed by the field of the merged line each one sums.
  merged_metrics = {
    events = {
      description = "Change events merged into the Delta tables: the events value of every merged batch (event=\"merged\")."
      # 1 to about 16 million events a batch, doubling.
      buckets = 24
    }
    files = {
      description = "Staged files taken by merged batches: the files value of every merged batch (event=\"merged\"), including files the merge quarantined."
      # 1 to 1024 files a batch (batch_max_files is at most 500), doubling.
      buckets = 10
    }
  }
}

resource "google_logging_metric" "merged" {
  for_each = local.merged_metrics

  project     = var.project
  name        = "${local.prefix}/merged_${each.key}"
  description = each.value.description
  filter      = "${local.functions_logs} AND jsonPayload.event=\"merged\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "1"
    display_name = "dsdelta merged ${each.key}"
    labels {
      key         = "table"
      value_type  = "STRING"
      description = "Source table id (db.table)."
    }
  }

  value_extractor = "EXTRACT(jsonPayload.${each.key})"
  label_extractors = {
    "table" = "EXTRACT(jsonPayload.table)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = each.value.buckets
      growth_factor      = 2
      scale              = 1
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_logging_metric" "staged_files" {
  project     = var.project
  name        = "${local.prefix}/staged_files"
  description = "Datastream files staged and registered for merge (event=\"staged\"). Counted once per file: a delivery that finds the file registered already logs event=\"staged_again\" instead."
  filter      = "${local.functions_logs} AND jsonPayload.event=\"staged\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "dsdelta staged files"
    labels {
      key         = "table"
      value_type  = "STRING"
      description = "Source table id (db.table)."
    }
  }

  label_extractors = {
    "table" = "EXTRACT(jsonPayload.table)"
  }

  depends_on = [google_project_service.apis]
}

resource "google_logging_metric" "reconciled_files" {
  project     = var.project
  name        = "${local.prefix}/reconciled_files"
  description = "Datastream files the scheduled reconcile handed to staging because the registry did not know them: their notification was lost, or they predate the deployment. No data is lost, but each one outside a first load means a notification path failed."
  filter      = "${local.functions_logs} AND jsonPayload.event=\"file_reconciled\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "dsdelta reconciled files"
    labels {
      key         = "table_folder"
      value_type  = "STRING"
      description = "Datastream table folder under the prefix (<schema>_<table>) the file was found in."
    }
  }

  label_extractors = {
    "table_folder" = "EXTRACT(jsonPayload.table_folder)"
  }

  depends_on = [google_project_service.apis]
}

resource "google_logging_metric" "function_errors" {
  project     = var.project
  name        = "${local.prefix}/function_errors"
  description = "Error-level log entries of the dsdelta functions (transient failures that were retried, crashes, timeouts)."
  filter      = "${local.functions_logs} AND severity>=ERROR"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "dsdelta function errors"
    labels {
      key         = "function"
      value_type  = "STRING"
      description = "Function (Cloud Run service) name."
    }
  }

  label_extractors = {
    "function" = "EXTRACT(resource.labels.service_name)"
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "quarantined_files" {
  count = var.enable_alerts ? 1 : 0

  project               = var.project
  display_name          = "dsdelta (${local.prefix}): files quarantined"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "A Datastream file was quarantined"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.quarantined_files.name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A Datastream file could not be staged and was quarantined; its table's other files go on. Find it with `dsdelta status` (or the log entries with jsonPayload.event=\"quarantined\", which carry the file, record number and reason), fix the cause, then `dsdelta replay`."
  }

  alert_strategy {
    auto_close = "86400s"
  }
}

resource "google_monitoring_alert_policy" "reconciled_files" {
  count = var.enable_alerts ? 1 : 0

  project               = var.project
  display_name          = "dsdelta (${local.prefix}): files reconciled (notification lost)"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "The reconcile staged a file no notification announced"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.reconciled_files.name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "${local.reconcile_tick_seconds}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table_folder"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The scheduled reconcile found Datastream files that no notification had announced, and handed them to staging: no data is lost, but a notification path failed. Expected only while a first deploy onto a running stream loads the existing files. Otherwise look at the log entries with jsonPayload.event=\"file_reconciled\" (table_folder, file, generation, age_seconds) and the reconcile_done summaries, then at the trigger: the bucket notification or Eventarc trigger, the onfile push subscription, dead-lettered notifications on the dead-letter subscription, onfile errors."
  }

  alert_strategy {
    auto_close = "86400s"
  }
}

resource "google_monitoring_alert_policy" "merge_lag" {
  count = var.enable_alerts ? 1 : 0

  project               = var.project
  display_name          = "dsdelta (${local.prefix}): merge lag above ${var.merge_lag_alert_seconds}s"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "p99 merge lag above ${var.merge_lag_alert_seconds}s for 10 minutes"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.merge_lag.name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.merge_lag_alert_seconds
      duration        = "600s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.table"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Changes take longer than expected to reach the Delta tables. Check `dsdelta status` for pending files and lease holders, the merge function's errors and instance limit, and the dead-letter subscription."
  }

  alert_strategy {
    auto_close = "3600s"
  }
}

resource "google_monitoring_alert_policy" "function_errors" {
  count = var.enable_alerts ? 1 : 0

  project               = var.project
  display_name          = "dsdelta (${local.prefix}): function errors"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "More than ${var.function_error_alert_threshold} errors in 5 minutes"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.function_errors.name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.function_error_alert_threshold
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.function"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A dsdelta function keeps failing. Failed calls are retried with backoff and dead-lettered after the configured number of attempts; read the function's error logs for the cause."
  }

  alert_strategy {
    auto_close = "3600s"
  }
}

resource "google_monitoring_alert_policy" "dead_letters" {
  count = var.enable_alerts ? 1 : 0

  project               = var.project
  display_name          = "dsdelta (${local.prefix}): dead-lettered messages waiting"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "Messages waiting on ${google_pubsub_subscription.dead_letter.name}"
    condition_threshold {
      filter          = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=\"${google_pubsub_subscription.dead_letter.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Messages reached the dead-letter topic: quarantine notices, or notifications/wake-ups that failed every delivery. Pull them from the dead-letter subscription, fix the cause, then `dsdelta replay`; acknowledge them once handled."
  }

  alert_strategy {
    auto_close = "86400s"
  }
}
