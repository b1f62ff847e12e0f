# The scheduled reconcile (DESIGN.md §3 "No file left behind"), planned
# against the mocked google provider: the compact function lists the
# Datastream bucket and publishes each file no notification announced to the
# reconcile topic, which is pushed to onfile in both trigger modes. The
# computed links (topic IDs, URLs, the topic's only publisher) are checked
# after a mocked apply in wiring.tftest.hcl.

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
}

variables {
  project     = "dsdelta-test-project"
  enable_apis = false
}

run "pubsub_mode_pushes_reconciled_files_to_onfile_like_notifications" {
  command = plan

  variables {
    trigger_mode = "pubsub"
  }

  assert {
    condition     = google_pubsub_topic.reconcile.name == "dsdelta-reconcile"
    error_message = "The reconcile topic must be named <prefix>-reconcile."
  }
  assert {
    condition = (
      google_pubsub_subscription.onfile_reconcile.name == "dsdelta-onfile-reconcile-push" &&
      google_pubsub_subscription.onfile_reconcile.push_config[0].oidc_token[0].service_account_email == "dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com"
    )
    error_message = "The reconcile subscription must push to onfile, authenticated as the onfile service account."
  }
  assert {
    condition = (
      google_pubsub_subscription.onfile_reconcile.retry_policy == google_pubsub_subscription.onfile[0].retry_policy &&
      google_pubsub_subscription.onfile_reconcile.dead_letter_policy[0].max_delivery_attempts == google_pubsub_subscription.onfile[0].dead_letter_policy[0].max_delivery_attempts &&
      google_pubsub_subscription.onfile_reconcile.ack_deadline_seconds == google_pubsub_subscription.onfile[0].ack_deadline_seconds &&
      google_pubsub_subscription.onfile_reconcile.message_retention_duration == google_pubsub_subscription.onfile[0].message_retention_duration &&
      google_pubsub_subscription.onfile_reconcile.expiration_policy[0].ttl == ""
    )
    error_message = "The reconcile subscription must retry, dead-letter and time out exactly like the notification subscription."
  }
  assert {
    condition     = google_pubsub_subscription_iam_member.members["onfile-reconcile-pubsub-agent-subscriber"].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com" && google_pubsub_subscription_iam_member.members["onfile-reconcile-pubsub-agent-subscriber"].subscription == "dsdelta-onfile-reconcile-push"
    error_message = "The Pub/Sub service agent must be able to dead-letter the reconcile subscription's messages."
  }
}

run "eventarc_mode_still_pushes_reconciled_files_to_onfile" {
  command = plan

  variables {
    trigger_mode = "eventarc"
  }

  assert {
    condition     = length(google_cloudfunctions2_function.onfile.event_trigger) == 1 && length(google_pubsub_subscription.onfile) == 0
    error_message = "eventarc mode must keep its Eventarc trigger and no notification subscription."
  }
  assert {
    condition = (
      google_pubsub_subscription.onfile_reconcile.push_config[0].oidc_token[0].service_account_email == "dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com" &&
      google_pubsub_subscription.onfile_reconcile.dead_letter_policy[0].max_delivery_attempts == 10 &&
      google_pubsub_subscription.onfile_reconcile.retry_policy[0].minimum_backoff == "10s" &&
      google_pubsub_subscription.onfile_reconcile.retry_policy[0].maximum_backoff == "600s" &&
      google_pubsub_subscription.onfile_reconcile.ack_deadline_seconds == 330
    )
    error_message = "In eventarc mode too, reconciled files must be pushed to onfile with retry and dead-letter policies."
  }
  assert {
    condition     = google_cloud_run_v2_service_iam_member.invoker["onfile"].member == "serviceAccount:dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com" && google_cloud_run_v2_service_iam_member.invoker["onfile"].role == "roles/run.invoker"
    error_message = "The push identity (the onfile account) must be allowed to invoke onfile in eventarc mode too."
  }
  assert {
    condition     = contains(keys(google_pubsub_subscription_iam_member.members), "onfile-reconcile-pubsub-agent-subscriber")
    error_message = "The Pub/Sub service agent must be able to dead-letter the reconcile subscription's messages in eventarc mode too."
  }
}

run "only_the_compact_account_may_publish_reconciled_files" {
  command = plan

  assert {
    condition = (
      google_pubsub_topic_iam_member.members["reconcile-compact-publisher"].role == "roles/pubsub.publisher" &&
      google_pubsub_topic_iam_member.members["reconcile-compact-publisher"].member == "serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"
    )
    error_message = "The compact account must be able to publish to the reconcile topic."
  }
  assert {
    condition     = length([for k, _ in google_pubsub_topic_iam_member.members : k if startswith(k, "reconcile-")]) == 1
    error_message = "No account but compact may publish to the reconcile topic."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.members : m.role != "roles/pubsub.publisher" || m.member != "serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"])
    error_message = "The compact account's publish right must be on the topic, never project-wide."
  }
  assert {
    condition = (
      google_storage_bucket_iam_member.members["datastream-compact-objectViewer"].bucket == "dsdelta-test-project-dsdelta-datastream" &&
      google_storage_bucket_iam_member.members["datastream-compact-objectViewer"].role == "roles/storage.objectViewer" &&
      google_storage_bucket_iam_member.members["datastream-compact-objectViewer"].member == "serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"
    )
    error_message = "The compact account must be able to list the Datastream bucket (and read object metadata) for the reconcile."
  }
  assert {
    condition     = !contains(keys(google_storage_bucket_iam_member.members), "datastream-merge-objectViewer") && length([for m in google_storage_bucket_iam_member.members : m if m.bucket == "dsdelta-test-project-dsdelta-datastream"]) == 2
    error_message = "Only onfile and compact may read the Datastream bucket."
  }
}

run "reconcile_ticks_run_more_often_than_compaction" {
  command = plan

  assert {
    condition     = google_cloud_scheduler_job.reconcile.name == "dsdelta-reconcile" && google_cloud_scheduler_job.reconcile.schedule == "*/10 * * * *" && google_cloud_scheduler_job.reconcile.time_zone == "Etc/UTC"
    error_message = "The reconcile job must tick every 10 minutes by default."
  }
  assert {
    condition     = base64decode(google_cloud_scheduler_job.reconcile.pubsub_target[0].data) == "{\"tasks\":[\"reconcile\"]}"
    error_message = "The reconcile job must ask for the reconcile task only."
  }
  assert {
    condition     = base64decode(google_cloud_scheduler_job.compact.pubsub_target[0].data) == "{}" && google_cloud_scheduler_job.compact.schedule == "15 * * * *"
    error_message = "The compaction job must keep its \"{}\" message (reconcile and maintenance) every 6 hours."
  }
}

run "compact_gets_the_reconcile_settings_with_their_defaults" {
  command = plan

  assert {
    condition = (
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_GRACE"] == "10m" &&
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_LOOKBACK"] == "2h"
    )
    error_message = "compact must receive the reconcile grace and lookback (10m and 2h by default)."
  }
  assert {
    condition     = !contains(keys(google_cloudfunctions2_function.compact.service_config[0].environment_variables), "DSDELTA_RECONCILE_SINCE")
    error_message = "An empty reconcile_since must leave DSDELTA_RECONCILE_SINCE unset (no lower bound)."
  }
  assert {
    condition = alltrue([
      for f in [google_cloudfunctions2_function.onfile, google_cloudfunctions2_function.merge] :
      length([for k, _ in f.service_config[0].environment_variables : k if startswith(k, "DSDELTA_RECONCILE_")]) == 0
    ])
    error_message = "Only compact runs the reconcile: onfile and merge get no reconcile settings."
  }
}

run "reconcile_settings_reach_compact_and_the_alert_window" {
  command = plan

  variables {
    reconcile_since    = "2026-01-01T01:00:00+01:00"
    reconcile_grace    = "1h30m"
    reconcile_lookback = "6h"
    reconcile_schedule = "*/5 * * * *"
  }

  assert {
    condition = (
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_SINCE"] == "2026-01-01T01:00:00+01:00" &&
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_GRACE"] == "1h30m" &&
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_LOOKBACK"] == "6h"
    )
    error_message = "compact must receive reconcile_since, reconcile_grace and reconcile_lookback as given."
  }
  assert {
    condition     = google_cloud_scheduler_job.reconcile.schedule == "*/5 * * * *"
    error_message = "The reconcile job must follow reconcile_schedule."
  }
  assert {
    condition     = google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].aggregations[0].alignment_period == "300s"
    error_message = "The reconciled-files alert must sum over one reconcile tick."
  }
}

run "reconciled_files_are_counted_and_alerted_per_table_folder" {
  command = plan

  assert {
    condition = (
      google_logging_metric.reconciled_files.name == "dsdelta/reconciled_files" &&
      strcontains(google_logging_metric.reconciled_files.filter, "jsonPayload.event=\"file_reconciled\"") &&
      strcontains(google_logging_metric.reconciled_files.filter, "resource.labels.service_name=\"dsdelta-compact\"") &&
      google_logging_metric.reconciled_files.metric_descriptor[0].metric_kind == "DELTA" &&
      google_logging_metric.reconciled_files.metric_descriptor[0].value_type == "INT64" &&
      google_logging_metric.reconciled_files.label_extractors["table_folder"] == "EXTRACT(jsonPayload.table_folder)"
    )
    error_message = "The reconciled-files metric must count the file_reconciled log entries per table folder."
  }
  assert {
    condition = (
      length(google_monitoring_alert_policy.reconciled_files) == 1 &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/dsdelta/reconciled_files\" AND resource.type=\"cloud_run_revision\"" &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].comparison == "COMPARISON_GT" &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].threshold_value == 0 &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].aggregations[0].alignment_period == "600s" &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].aggregations[0].per_series_aligner == "ALIGN_SUM" &&
      google_monitoring_alert_policy.reconciled_files[0].conditions[0].condition_threshold[0].aggregations[0].group_by_fields == tolist(["metric.label.table_folder"])
    )
    error_message = "The reconciled-files alert must fire when any file was reconciled within a tick (10 minutes by default)."
  }
}

run "no_reconcile_alert_when_alerts_are_off" {
  command = plan

  variables {
    enable_alerts = false
  }

  assert {
    condition     = length(google_monitoring_alert_policy.reconciled_files) == 0 && google_logging_metric.reconciled_files.name == "dsdelta/reconciled_files"
    error_message = "enable_alerts = false must drop the alert policy and keep the metric."
  }
}
