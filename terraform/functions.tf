# The three Cloud Functions (gen2, i.e. Cloud Run functions), built by Cloud
# Build from the repository root archive. They share their configuration
# (environment below) and differ in entry point, sizing, identity and trigger:
#   onfile : Eventarc object-finalized trigger (trigger_mode = "eventarc"), or
#            the push subscription on the file-events topic (pubsub.tf);
#   merge  : push subscription on the wake-up topic;
#   compact: push subscription on the compaction topic fed by Cloud Scheduler
#            (compaction and reconcile ticks); the reconcile publishes the
#            files it finds to the reconcile topic, pushed to onfile in
#            both trigger modes (pubsub.tf).
# All three accept only internal traffic (Pub/Sub and Eventarc count as
# internal) and require an authenticated invoker.

locals {
  common_environment = merge(
    {
      DSDELTA_PROJECT             = var.project
      DSDELTA_SOURCE_BUCKET       = local.datastream_bucket_name
      DSDELTA_SOURCE_PREFIX       = var.datastream_prefix
      DSDELTA_LAKE_URL            = local.lake_url
      DSDELTA_WAKE_TOPIC          = google_pubsub_topic.wake.id
      DSDELTA_DEAD_LETTER_TOPIC   = google_pubsub_topic.dead_letter.id
      DSDELTA_FIRESTORE_DATABASE  = local.firestore_database
      DSDELTA_MERGE_BUDGET        = "${local.merge_budget_seconds}s"
      DSDELTA_TOMBSTONE_RETENTION = "${var.tombstone_retention_days * 24}h"
      DSDELTA_LOG_LEVEL           = var.log_level
    },
    var.dsdelta_config == "" ? {} : { DSDELTA_CONFIG = var.dsdelta_config },
  )

  # The reconcile runs in the compact function only (DSDELTA_CONFIG's
  # reconcile_* keys win over these). DSDELTA_RECONCILE_SINCE is left out when
  # empty: no lower bound.
  reconcile_environment = merge(
    {
      DSDELTA_RECONCILE_TOPIC    = google_pubsub_topic.reconcile.id
      DSDELTA_RECONCILE_GRACE    = var.reconcile_grace
      DSDELTA_RECONCILE_LOOKBACK = var.reconcile_lookback
    },
    var.reconcile_since == "" ? {} : { DSDELTA_RECONCILE_SINCE = var.reconcile_since },
  )

  # reconcile_grace and reconcile_lookback in seconds (their validations
  # allow only h, m and s units).
  reconcile_seconds = { for k, d in { grace = var.reconcile_grace, lookback = var.reconcile_lookback } : k => sum(concat([0], [
    for m in regexall("([0-9]+)([hms])", d) : tonumber(m[0]) * lookup({ h = 3600, m = 60, s = 1 }, m[1])
  ])) }

  # GOMEMLIMIT per function: four fifths of its memory, so the Go collector
  # works harder before the instance reaches its limit instead of letting
  # the heap double between collections (Cloud Run's /tmp is memory too).
  # Given it, dsdelta collects when the heap reaches it (shared/memlimit):
  # the instance's memory is its own, and collections cost less CPU.
  function_memory = {
    onfile  = var.onfile_function.memory
    merge   = var.merge_function.memory
    compact = var.compact_function.memory
  }
  function_memory_mib = { for name, m in local.function_memory : name => (
    endswith(m, "Gi") ? tonumber(trimsuffix(m, "Gi")) * 1024 :
    endswith(m, "Mi") ? tonumber(trimsuffix(m, "Mi")) :
    endswith(m, "G") ? tonumber(trimsuffix(m, "G")) * 1000000000 / 1048576 :
    tonumber(trimsuffix(m, "M")) * 1000000 / 1048576
  ) }
  function_environment = { for name, mib in local.function_memory_mib : name => merge(
    local.common_environment,
    name == "compact" ? local.reconcile_environment : {},
    { GOMEMLIMIT = "${floor(mib * 4 / 5)}MiB" },
  ) }

  source_object = {
    bucket = google_storage_bucket.function_source.name
    object = google_storage_bucket_object.function_source.name
  }
}

resource "google_cloudfunctions2_function" "onfile" {
  project     = var.project
  location    = var.region
  name        = local.function_names.onfile
  description = local.functions.onfile.description
  labels      = local.labels

  build_config {
    runtime     = var.go_runtime
    entry_point = local.functions.onfile.entry_point
    source {
      storage_source {
        bucket = local.source_object.bucket
        object = local.source_object.object
      }
    }
  }

  service_config {
    available_memory                 = var.onfile_function.memory
    available_cpu                    = var.onfile_function.cpu
    timeout_seconds                  = var.onfile_function.timeout_seconds
    max_instance_count               = var.onfile_function.max_instances
    min_instance_count               = var.onfile_function.min_instances
    max_instance_request_concurrency = 1
    environment_variables            = local.function_environment.onfile
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = local.sa_email.onfile
  }

  # Eventarc mode: Cloud Functions manages the trigger and its subscription.
  # RETRY_POLICY_RETRY redelivers failed events with exponential backoff for up
  # to 24 hours; such a managed subscription has no dead-letter topic, so an
  # event still failing after that is dropped (the file stays in the bucket and
  # the scheduled reconcile stages it). Eventarc cannot filter on an object
  # prefix: onfile ignores objects outside DSDELTA_SOURCE_PREFIX itself. In
  # both modes onfile also takes the reconcile topic's pushes at its URL.
  dynamic "event_trigger" {
    for_each = var.trigger_mode == "eventarc" ? [1] : []
    content {
      trigger_region        = lower(local.datastream_bucket_location)
      event_type            = "google.cloud.storage.object.v1.finalized"
      retry_policy          = "RETRY_POLICY_RETRY"
      service_account_email = local.sa_email.onfile
      event_filters {
        attribute = "bucket"
        value     = local.datastream_bucket_name
      }
    }
  }

  depends_on = [
    google_project_iam_member.members, # Eventarc checks the receiver role at trigger creation
    google_storage_bucket_iam_member.members,
    google_pubsub_topic_iam_member.members,
  ]
}

resource "google_cloudfunctions2_function" "merge" {
  project     = var.project
  location    = var.region
  name        = local.function_names.merge
  description = local.functions.merge.description
  labels      = local.labels

  build_config {
    runtime     = var.go_runtime
    entry_point = local.functions.merge.entry_point
    source {
      storage_source {
        bucket = local.source_object.bucket
        object = local.source_object.object
      }
    }
  }

  service_config {
    available_memory                 = var.merge_function.memory
    available_cpu                    = var.merge_function.cpu
    timeout_seconds                  = var.merge_function.timeout_seconds
    max_instance_count               = var.merge_function.max_instances
    min_instance_count               = var.merge_function.min_instances
    max_instance_request_concurrency = 1
    environment_variables            = local.function_environment.merge
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = local.sa_email.merge
  }

  lifecycle {
    precondition {
      condition     = local.merge_budget_seconds < var.merge_function.timeout_seconds
      error_message = "merge_budget_seconds must be below merge_function.timeout_seconds, or a merge could be killed while holding its lease."
    }
  }

  depends_on = [
    google_project_iam_member.members,
    google_storage_bucket_iam_member.members,
    google_pubsub_topic_iam_member.members,
  ]
}

resource "google_cloudfunctions2_function" "compact" {
  project     = var.project
  location    = var.region
  name        = local.function_names.compact
  description = local.functions.compact.description
  labels      = local.labels

  build_config {
    runtime     = var.go_runtime
    entry_point = local.functions.compact.entry_point
    source {
      storage_source {
        bucket = local.source_object.bucket
        object = local.source_object.object
      }
    }
  }

  service_config {
    available_memory                 = var.compact_function.memory
    available_cpu                    = var.compact_function.cpu
    timeout_seconds                  = var.compact_function.timeout_seconds
    max_instance_count               = var.compact_function.max_instances
    min_instance_count               = var.compact_function.min_instances
    max_instance_request_concurrency = 1
    environment_variables            = local.function_environment.compact
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = local.sa_email.compact
  }

  lifecycle {
    precondition {
      condition     = local.merge_budget_seconds < var.compact_function.timeout_seconds
      error_message = "merge_budget_seconds must be below compact_function.timeout_seconds, or a compaction could be killed while holding its lease."
    }
    precondition {
      condition     = local.reconcile_seconds.lookback > local.reconcile_seconds.grace
      error_message = "reconcile_lookback must be longer than reconcile_grace: a late file must still be inside the listed window once it is old enough to be reconciled."
    }
  }

  depends_on = [
    google_project_iam_member.members,
    google_storage_bucket_iam_member.members,
    google_pubsub_topic_iam_member.members,
  ]
}
