# Topics and subscriptions.
#
# Every Pub/Sub-delivered function call goes through a push subscription that
# this configuration owns, so retry (exponential backoff) and dead-lettering are
# declared here rather than left to a platform-managed subscription. Pushes go
# to the function's Cloud Run URL at /projects/<p>/topics/<t>, with an OIDC token
# of the function's own service account; functions-framework-go turns the push
# body into the same google.cloud.pubsub.topic.v1.messagePublished CloudEvent an
# Eventarc trigger would deliver, so the entry points see one event shape.
#
# A function returns an error only for transient causes (DESIGN.md §3 Errors):
# Pub/Sub then redelivers with backoff and, after max_delivery_attempts, moves
# the message to the dead-letter topic. Permanently bad files never get there
# through retries: onfile quarantines them and publishes to the same topic.

locals {
  ack_deadline = {
    # A push is acknowledged by the HTTP response, so the deadline must cover a
    # whole call; Pub/Sub caps it at 600 seconds.
    for k, f in local.functions : k => min(600, max(10, f.sizing.timeout_seconds + 30))
  }

  push_retry_policy = {
    minimum_backoff = "${var.retry_minimum_backoff_seconds}s"
    maximum_backoff = "${max(var.retry_minimum_backoff_seconds, var.retry_maximum_backoff_seconds)}s"
  }
}

# GCS notifications of new Datastream files (trigger_mode = "pubsub").
resource "google_pubsub_topic" "file_events" {
  count = var.trigger_mode == "pubsub" ? 1 : 0

  project = var.project
  name    = "${local.prefix}-file-events"
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

# Merge wake-ups: {"table":"db.table"}, published by onfile after staging and
# by merge when it releases a table with work left.
resource "google_pubsub_topic" "wake" {
  project = var.project
  name    = "${local.prefix}-merge-wake"
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

# Ticks from Cloud Scheduler (scheduler.tf): compaction ticks ("{}": reconcile
# and maintenance) and the more frequent reconcile ticks
# ({"tasks":["reconcile"]}) share this topic and its push subscription.
resource "google_pubsub_topic" "compact" {
  project = var.project
  name    = "${local.prefix}-compact"
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

# Reconciled files: for each Datastream data file the registry does not know
# (its notification was lost: first deploy onto a running stream, a
# dead-lettered notification, a broken trigger), the compact function's
# reconcile publishes a message of exactly the GCS notification's shape
# (JSON_API_V1 object resource, attributes eventType=OBJECT_FINALIZE,
# bucketId, objectId, objectGeneration...) plus dsdeltaReconciled=true. Only
# the compact account may publish here (iam.tf). It exists in both trigger
# modes: in eventarc mode onfile takes these pushes at its URL beside its
# Eventarc trigger, as merge and compact take theirs.
resource "google_pubsub_topic" "reconcile" {
  project = var.project
  name    = "${local.prefix}-reconcile"
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

# Dead letters: messages that exhausted their deliveries, and quarantine
# notices published by the functions for permanently bad files.
resource "google_pubsub_topic" "dead_letter" {
  project = var.project
  name    = "${local.prefix}-dead-letter"
  labels  = local.labels

  # Keep dead letters on the topic too, so a subscription created later for a
  # replay can seek back to them.
  message_retention_duration = "604800s"

  depends_on = [google_project_service.apis]
}

# Holds dead letters for an operator (a topic without subscriptions drops its
# messages). Pull it with `gcloud pubsub subscriptions pull`, fix, then
# `dsdelta replay`.
resource "google_pubsub_subscription" "dead_letter" {
  project = var.project
  name    = "${local.prefix}-dead-letter-hold"
  topic   = google_pubsub_topic.dead_letter.id
  labels  = local.labels

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  retain_acked_messages      = true

  expiration_policy {
    ttl = "" # never expires, even when nobody pulls for a long time
  }
}

resource "google_pubsub_subscription" "onfile" {
  count = var.trigger_mode == "pubsub" ? 1 : 0

  project = var.project
  name    = "${local.prefix}-onfile-push"
  topic   = google_pubsub_topic.file_events[0].id
  labels  = local.labels

  ack_deadline_seconds       = local.ack_deadline.onfile
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.onfile.service_config[0].uri}/${google_pubsub_topic.file_events[0].id}"
    oidc_token {
      service_account_email = local.sa_email.onfile
      audience              = google_cloudfunctions2_function.onfile.service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = local.push_retry_policy.minimum_backoff
    maximum_backoff = local.push_retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  # The push identity must be allowed to invoke the function first, or the
  # first notifications bounce (and count as delivery attempts).
  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_token_creator,
    google_pubsub_topic_iam_member.members,
  ]
}

# Reconciled files → onfile, with the same retry and dead-letter policies as
# the notification subscription: to onfile a reconciled file is a
# notification like any other, and fanning a tick's files out through a
# push subscription stages them in parallel on onfile instances.
resource "google_pubsub_subscription" "onfile_reconcile" {
  project = var.project
  name    = "${local.prefix}-onfile-reconcile-push"
  topic   = google_pubsub_topic.reconcile.id
  labels  = local.labels

  ack_deadline_seconds       = local.ack_deadline.onfile
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.onfile.service_config[0].uri}/${google_pubsub_topic.reconcile.id}"
    oidc_token {
      service_account_email = local.sa_email.onfile
      audience              = google_cloudfunctions2_function.onfile.service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = local.push_retry_policy.minimum_backoff
    maximum_backoff = local.push_retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_token_creator,
    google_pubsub_topic_iam_member.members,
  ]
}

resource "google_pubsub_subscription" "merge" {
  project = var.project
  name    = "${local.prefix}-merge-push"
  topic   = google_pubsub_topic.wake.id
  labels  = local.labels

  ack_deadline_seconds       = local.ack_deadline.merge
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.merge.service_config[0].uri}/${google_pubsub_topic.wake.id}"
    oidc_token {
      service_account_email = local.sa_email.merge
      audience              = google_cloudfunctions2_function.merge.service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = local.push_retry_policy.minimum_backoff
    maximum_backoff = local.push_retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_token_creator,
    google_pubsub_topic_iam_member.members,
  ]
}

resource "google_pubsub_subscription" "compact" {
  project = var.project
  name    = "${local.prefix}-compact-push"
  topic   = google_pubsub_topic.compact.id
  labels  = local.labels

  ack_deadline_seconds = local.ack_deadline.compact
  # A missed tick is replaced by the next one; don't pile them up.
  message_retention_duration = "3600s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.compact.service_config[0].uri}/${google_pubsub_topic.compact.id}"
    oidc_token {
      service_account_email = local.sa_email.compact
      audience              = google_cloudfunctions2_function.compact.service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = local.push_retry_policy.minimum_backoff
    maximum_backoff = local.push_retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_token_creator,
    google_pubsub_topic_iam_member.members,
  ]
}

# New Datastream files → file_events topic. Filtered at the source by the
# Datastream prefix, so files elsewhere in the bucket never invoke onfile.
resource "google_storage_notification" "datastream" {
  count = var.trigger_mode == "pubsub" ? 1 : 0

  bucket             = local.datastream_bucket_name
  topic              = google_pubsub_topic.file_events[0].id
  payload_format     = "JSON_API_V1"
  event_types        = ["OBJECT_FINALIZE"]
  object_name_prefix = local.datastream_object_prefix == "" ? null : local.datastream_object_prefix

  # The Cloud Storage service agent must be able to publish before GCS accepts
  # the notification configuration.
  depends_on = [google_pubsub_topic_iam_member.members]
}
