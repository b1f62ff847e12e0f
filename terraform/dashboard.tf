# The pipeline's Cloud Monitoring dashboard: one collapsible group per
# concern, its charts three to a line of a 48-column mosaic.
#   tables      : end-to-end lag and events merged per minute, by table;
#   files       : files staged and merged per minute, files waiting for
#                 staging, quarantined and reconciled files;
#   functions   : merge duration, failed requests, error log entries,
#                 instances and memory of each function;
#   dead letters: messages dead-lettered by each push subscription, and
#                 those waiting on the dead-letter hold subscription.
#
# The JSON follows the Dashboard API (projects.dashboards, camelCase). Plan
# does not check it: a wrong field or enum fails at apply, so
# schemacheck/dashboardcheck reads it from the plan and decodes it strictly
# with the API's own message types. Zero positions, empty lists and false
# flags are left out: the API drops them, and the provider would then show
# a change on every plan.
#
# Log-based metrics (monitoring.tf) are charted as
# logging.googleapis.com/user/<name>; sums of a distribution's values
# (events and files per minute) need PromQL, where the same metric is
# logging_googleapis_com:user_<name with every other character as _>, with
# _sum appended for a distribution.

locals {
  dashboard_metric = {
    for k, m in {
      quarantined_files = google_logging_metric.quarantined_files
      merge_lag         = google_logging_metric.merge_lag
      reconciled_files  = google_logging_metric.reconciled_files
      function_errors   = google_logging_metric.function_errors
    } : k => "metric.type=\"logging.googleapis.com/user/${m.name}\" AND resource.type=\"cloud_run_revision\""
  }
  dashboard_promql = {
    for k, m in {
      merged_events = google_logging_metric.merged["events"]
      merged_files  = google_logging_metric.merged["files"]
      staged_files  = google_logging_metric.staged_files
    } : k => "logging_googleapis_com:user_${replace(m.name, "/[^A-Za-z0-9_]/", "_")}"
  }
  # PromQL: a per-minute rate over 5 minutes, by table, of a distribution's
  # _sum or of a counter, selected with its resource type (a log-based
  # metric can have several).
  dashboard_per_minute = {
    for k, series in {
      merged_events = "${local.dashboard_promql.merged_events}_sum"
      merged_files  = "${local.dashboard_promql.merged_files}_sum"
      staged_files  = local.dashboard_promql.staged_files
    } : k => "sum by (table) (rate(${series}{monitored_resource=\"cloud_run_revision\"}[5m])) * 60"
  }

  # The functions' Cloud Run services.
  dashboard_run       = "resource.type=\"cloud_run_revision\" AND resource.label.service_name"
  dashboard_functions = "${local.dashboard_run}=one_of(${join(",", [for n in values(local.function_names) : "\"${n}\""])})"

  # Where files wait for onfile (the Eventarc trigger's own subscription is
  # managed by Eventarc and not named here), and every subscription that
  # dead-letters.
  dashboard_onfile_subscriptions = concat(google_pubsub_subscription.onfile[*].name, [google_pubsub_subscription.onfile_reconcile.name])
  dashboard_subscriptions = {
    for k, subs in {
      waiting      = concat(local.dashboard_onfile_subscriptions, [google_pubsub_subscription.merge.name])
      onfile       = local.dashboard_onfile_subscriptions
      dead_letters = concat(local.dashboard_onfile_subscriptions, [google_pubsub_subscription.merge.name, google_pubsub_subscription.compact.name])
      hold         = [google_pubsub_subscription.dead_letter.name]
    } : k => "resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=one_of(${join(",", [for s in subs : "\"${s}\""])})"
  }
  dashboard_pubsub = "pubsub.googleapis.com/subscription"

  # One row (collapsible group) per concern. A chart: its title, y axis
  # label, plot (default LINE), alignment period in seconds (default 60),
  # optional threshold lines, and its data sets: either promql, or a
  # filter with aligner, reducer, optional group_by and legend.
  dashboard_rows = [
    {
      title = "Tables: end-to-end lag and events merged"
      charts = [
        {
          title      = "End-to-end lag p99 by table (source commit to Delta commit)"
          y          = "seconds"
          period     = 300
          thresholds = [{ label = "merge lag alert (merge_lag_alert_seconds)", value = var.merge_lag_alert_seconds }]
          sets       = [{ filter = local.dashboard_metric.merge_lag, aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", group_by = ["metric.label.table"] }]
        },
        {
          title  = "End-to-end lag p50 by table"
          y      = "seconds"
          period = 300
          sets   = [{ filter = local.dashboard_metric.merge_lag, aligner = "ALIGN_PERCENTILE_50", reducer = "REDUCE_MAX", group_by = ["metric.label.table"] }]
        },
        {
          title = "Events merged per minute by table"
          y     = "events/min"
          plot  = "STACKED_AREA"
          sets  = [{ promql = local.dashboard_per_minute.merged_events }]
        },
      ]
    },
    {
      title = "Files: staged and merged, waiting, quarantined, reconciled"
      charts = [
        {
          title = "Files staged per minute by table"
          y     = "files/min"
          plot  = "STACKED_AREA"
          sets  = [{ promql = local.dashboard_per_minute.staged_files }]
        },
        {
          title = "Files merged per minute by table"
          y     = "files/min"
          plot  = "STACKED_AREA"
          sets  = [{ promql = local.dashboard_per_minute.merged_files }]
        },
        {
          title = "Files and wake-ups waiting, by subscription"
          y     = "messages"
          sets  = [{ filter = "metric.type=\"${local.dashboard_pubsub}/num_undelivered_messages\" AND ${local.dashboard_subscriptions.waiting}", aligner = "ALIGN_MAX", reducer = "REDUCE_SUM", group_by = ["resource.label.subscription_id"] }]
        },
        {
          title = "Oldest file notification waiting for onfile"
          y     = "seconds"
          sets  = [{ filter = "metric.type=\"${local.dashboard_pubsub}/oldest_unacked_message_age\" AND ${local.dashboard_subscriptions.onfile}", aligner = "ALIGN_MAX", reducer = "REDUCE_MAX", group_by = ["resource.label.subscription_id"] }]
        },
        {
          title = "Files quarantined by table"
          y     = "files"
          plot  = "STACKED_BAR"
          sets  = [{ filter = local.dashboard_metric.quarantined_files, aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", group_by = ["metric.label.table"] }]
        },
        {
          title = "Files reconciled (notification lost) by table folder"
          y     = "files"
          plot  = "STACKED_BAR"
          sets  = [{ filter = local.dashboard_metric.reconciled_files, aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", group_by = ["metric.label.table_folder"] }]
        },
      ]
    },
    {
      title = "Functions: merge duration, errors, instances and memory"
      charts = [
        {
          title = "Merge duration (merge function request latency)"
          y     = "ms"
          sets = [for p in [50, 99] : {
            filter  = "metric.type=\"run.googleapis.com/request_latencies\" AND ${local.dashboard_run}=\"${local.function_names.merge}\""
            aligner = "ALIGN_DELTA"
            reducer = "REDUCE_PERCENTILE_${p}"
            legend  = "p${p}"
          }]
        },
        {
          title = "Request latency p99 by function"
          y     = "ms"
          sets  = [{ filter = "metric.type=\"run.googleapis.com/request_latencies\" AND ${local.dashboard_functions}", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_99", group_by = ["resource.label.service_name"] }]
        },
        {
          title = "Failed requests (4xx, 5xx) by function"
          y     = "requests"
          plot  = "STACKED_BAR"
          sets  = [{ filter = "metric.type=\"run.googleapis.com/request_count\" AND ${local.dashboard_functions} AND metric.label.response_code_class=one_of(\"4xx\",\"5xx\")", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", group_by = ["resource.label.service_name", "metric.label.response_code_class"] }]
        },
        {
          title = "Error log entries by function"
          y     = "entries"
          plot  = "STACKED_BAR"
          sets  = [{ filter = local.dashboard_metric.function_errors, aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", group_by = ["metric.label.function"] }]
        },
        {
          title = "Instances by function and state"
          y     = "instances"
          plot  = "STACKED_AREA"
          sets  = [{ filter = "metric.type=\"run.googleapis.com/container/instance_count\" AND ${local.dashboard_functions}", aligner = "ALIGN_MAX", reducer = "REDUCE_SUM", group_by = ["resource.label.service_name", "metric.label.state"] }]
        },
        {
          title = "Memory utilization p99 by function"
          y     = "fraction of memory"
          # GOMEMLIMIT is four fifths of each function's memory
          # (functions.tf): a busy instance reads about this much.
          thresholds = [{ label = "GOMEMLIMIT", value = 0.8 }]
          sets       = [{ filter = "metric.type=\"run.googleapis.com/container/memory/utilizations\" AND ${local.dashboard_functions}", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_99", group_by = ["resource.label.service_name"] }]
        },
      ]
    },
    {
      title = "Dead letters"
      charts = [
        {
          title = "Messages dead-lettered by subscription"
          y     = "messages"
          plot  = "STACKED_BAR"
          sets  = [{ filter = "metric.type=\"${local.dashboard_pubsub}/dead_letter_message_count\" AND ${local.dashboard_subscriptions.dead_letters}", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", group_by = ["resource.label.subscription_id"] }]
        },
        {
          title = "Dead letters and quarantine notices waiting on ${google_pubsub_subscription.dead_letter.name}"
          y     = "messages"
          sets  = [{ filter = "metric.type=\"${local.dashboard_pubsub}/num_undelivered_messages\" AND ${local.dashboard_subscriptions.hold}", aligner = "ALIGN_MAX", reducer = "REDUCE_SUM" }]
        },
        {
          title = "Age of the oldest dead letter waiting"
          y     = "seconds"
          sets  = [{ filter = "metric.type=\"${local.dashboard_pubsub}/oldest_unacked_message_age\" AND ${local.dashboard_subscriptions.hold}", aligner = "ALIGN_MAX", reducer = "REDUCE_MAX" }]
        },
      ]
    },
  ]

  # Each chart as an xyChart widget. Optional keys enter only when set
  # ({ for ... if ... } keeps a key or drops it), so the JSON holds no
  # empty or default values.
  dashboard_widgets = [for r in local.dashboard_rows : [for c in r.charts : {
    title = c.title
    xyChart = merge(
      {
        dataSets = [for s in c.sets : merge(
          { plotType = try(c.plot, "LINE"), minAlignmentPeriod = "${try(c.period, 60)}s" },
          { for k, v in { legendTemplate = try(s.legend, "") } : k => v if v != "" },
          { timeSeriesQuery = merge(
            { for k, v in { prometheusQuery = try(s.promql, "") } : k => v if v != "" },
            { for k, v in { timeSeriesFilter = try({
              filter = s.filter
              aggregation = merge(
                { alignmentPeriod = "${try(c.period, 60)}s", perSeriesAligner = s.aligner, crossSeriesReducer = s.reducer },
                { for k, v in { groupByFields = try(s.group_by, []) } : k => v if length(v) > 0 },
              )
            }, null) } : k => v if v != null },
          ) },
        )]
        yAxis = { label = c.y, scale = "LINEAR" }
      },
      { for k, v in { thresholds = try(c.thresholds, []) } : k => v if length(v) > 0 },
    )
  }]]

  # Mosaic layout: each row is a collapsible group spanning the width and
  # the lines of its charts, which lie inside it.
  dashboard_columns       = 48
  dashboard_per_line      = 3
  dashboard_chart_width   = local.dashboard_columns / local.dashboard_per_line
  dashboard_chart_height  = 16
  dashboard_row_heights   = [for r in local.dashboard_rows : ceil(length(r.charts) / local.dashboard_per_line) * local.dashboard_chart_height]
  dashboard_row_positions = [for i, r in local.dashboard_rows : sum(concat([0], slice(local.dashboard_row_heights, 0, i)))]
  dashboard_tiles = flatten([for i, r in local.dashboard_rows : concat(
    [merge(
      { width = local.dashboard_columns, height = local.dashboard_row_heights[i], widget = { title = r.title, collapsibleGroup = {} } },
      { for k, v in { yPos = local.dashboard_row_positions[i] } : k => v if v > 0 },
    )],
    [for j, widget in local.dashboard_widgets[i] : merge(
      { width = local.dashboard_chart_width, height = local.dashboard_chart_height, widget = widget },
      { for k, v in {
        xPos = (j % local.dashboard_per_line) * local.dashboard_chart_width
        yPos = local.dashboard_row_positions[i] + floor(j / local.dashboard_per_line) * local.dashboard_chart_height
      } : k => v if v > 0 },
    )],
  )])
}

resource "google_monitoring_dashboard" "dsdelta" {
  project = var.project
  dashboard_json = jsonencode({
    displayName  = "dsdelta (${local.prefix})"
    mosaicLayout = { columns = local.dashboard_columns, tiles = local.dashboard_tiles }
  })

  depends_on = [google_project_service.apis]
}
