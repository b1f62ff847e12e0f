# Least privilege: one service account per function, each granted only what
# its function does, on the narrowest resource that can carry the grant.
# Nothing here grants editor/owner or binds allUsers/allAuthenticatedUsers;
# tests/security.tftest.hcl checks both.
#
#   onfile : reads the Datastream bucket, writes staged files to the lake,
#            uses the registry, publishes wake-ups and dead letters.
#   merge  : reads/writes/deletes lake objects, uses lease and registry,
#            re-publishes wake-ups, publishes dead letters.
#   compact: reads/writes/deletes lake objects, uses the lease, publishes
#            wake-ups for tables it finds with pending staged files; for the
#            reconcile, lists the Datastream bucket and is the only publisher
#            of the reconcile topic.
# Each account also invokes its own function only (it is the identity of the
# push subscription or Eventarc trigger that calls the function).

resource "google_service_account" "onfile" {
  project      = var.project
  account_id   = "${local.prefix}-onfile"
  display_name = "dsdelta onfile function"
  description  = "Runs the dsdelta onfile function and signs the pushes/events that invoke it."
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "merge" {
  project      = var.project
  account_id   = "${local.prefix}-merge"
  display_name = "dsdelta merge function"
  description  = "Runs the dsdelta merge function and signs the pushes that invoke it."
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "compact" {
  project      = var.project
  account_id   = "${local.prefix}-compact"
  display_name = "dsdelta compact function"
  description  = "Runs the dsdelta compact function and signs the pushes that invoke it."
  depends_on   = [google_project_service.apis]
}

locals {
  # roles/storage.objectUser: get, list, create, overwrite and delete objects,
  # without the IAM/ACL administration that objectAdmin adds. Overwriting or
  # removing a staged file needs delete, so objectCreator would not do.
  bucket_members = {
    "datastream-onfile-objectViewer" = { bucket = local.datastream_bucket_name, role = "roles/storage.objectViewer", member = local.sa_member.onfile }
    # The reconcile lists the Datastream folders (storage.objects.list) and
    # reads object metadata (storage.objects.get; GCS has no permission for
    # metadata alone). objectViewer is the smallest predefined role with both;
    # a custom role would only drop managed-folder reads, at the price of a
    # project-level role definition and iam.roleAdmin for the deployer.
    "datastream-compact-objectViewer" = { bucket = local.datastream_bucket_name, role = "roles/storage.objectViewer", member = local.sa_member.compact }
    "lake-onfile-objectUser"          = { bucket = local.lake_bucket_name, role = "roles/storage.objectUser", member = local.sa_member.onfile }
    "lake-merge-objectUser"           = { bucket = local.lake_bucket_name, role = "roles/storage.objectUser", member = local.sa_member.merge }
    "lake-compact-objectUser"         = { bucket = local.lake_bucket_name, role = "roles/storage.objectUser", member = local.sa_member.compact }
  }

  topic_members = merge(
    {
      "wake-onfile-publisher"         = { topic = google_pubsub_topic.wake.id, role = "roles/pubsub.publisher", member = local.sa_member.onfile }
      "wake-merge-publisher"          = { topic = google_pubsub_topic.wake.id, role = "roles/pubsub.publisher", member = local.sa_member.merge }
      "wake-compact-publisher"        = { topic = google_pubsub_topic.wake.id, role = "roles/pubsub.publisher", member = local.sa_member.compact }
      "dead-letter-onfile-publisher"  = { topic = google_pubsub_topic.dead_letter.id, role = "roles/pubsub.publisher", member = local.sa_member.onfile }
      "dead-letter-merge-publisher"   = { topic = google_pubsub_topic.dead_letter.id, role = "roles/pubsub.publisher", member = local.sa_member.merge }
      "dead-letter-compact-publisher" = { topic = google_pubsub_topic.dead_letter.id, role = "roles/pubsub.publisher", member = local.sa_member.compact }
      # Reconciled files look like GCS notifications to onfile: only the
      # compact account (the reconcile) may publish them.
      "reconcile-compact-publisher" = { topic = google_pubsub_topic.reconcile.id, role = "roles/pubsub.publisher", member = local.sa_member.compact }
      # Pub/Sub forwards undeliverable messages as its own service agent.
      "dead-letter-pubsub-agent-publisher" = { topic = google_pubsub_topic.dead_letter.id, role = "roles/pubsub.publisher", member = local.pubsub_service_agent }
    },
    var.trigger_mode == "pubsub" ? {
      # GCS publishes bucket notifications as the Cloud Storage service agent.
      "file-events-gcs-agent-publisher" = { topic = google_pubsub_topic.file_events[0].id, role = "roles/pubsub.publisher", member = local.gcs_service_agent }
    } : {},
  )

  # Dead-lettering also needs the Pub/Sub service agent to acknowledge the
  # forwarded message on the source subscription.
  subscription_members = merge(
    {
      "merge-pubsub-agent-subscriber"            = { subscription = google_pubsub_subscription.merge.name, role = "roles/pubsub.subscriber", member = local.pubsub_service_agent }
      "compact-pubsub-agent-subscriber"          = { subscription = google_pubsub_subscription.compact.name, role = "roles/pubsub.subscriber", member = local.pubsub_service_agent }
      "onfile-reconcile-pubsub-agent-subscriber" = { subscription = google_pubsub_subscription.onfile_reconcile.name, role = "roles/pubsub.subscriber", member = local.pubsub_service_agent }
    },
    var.trigger_mode == "pubsub" ? {
      "onfile-pubsub-agent-subscriber" = { subscription = google_pubsub_subscription.onfile[0].name, role = "roles/pubsub.subscriber", member = local.pubsub_service_agent }
    } : {},
  )

  firestore_condition = {
    title       = "dsdelta-firestore-database-only"
    description = "Limits the grant to the dsdelta Firestore database."
    expression  = "resource.name == \"projects/${var.project}/databases/${local.firestore_database}\""
  }

  # Project-level grants, each because the role cannot be granted lower down.
  project_members = merge(
    {
      # Firestore data access is granted on the project, limited by an IAM
      # condition to the dsdelta database.
      "onfile-datastore-user"  = { role = "roles/datastore.user", member = local.sa_member.onfile, condition = local.firestore_condition }
      "merge-datastore-user"   = { role = "roles/datastore.user", member = local.sa_member.merge, condition = local.firestore_condition }
      "compact-datastore-user" = { role = "roles/datastore.user", member = local.sa_member.compact, condition = local.firestore_condition }
    },
    var.trigger_mode == "eventarc" ? {
      # Eventarc delivers events only to a trigger identity holding this role,
      # which exists only at project level.
      "onfile-eventarc-event-receiver" = { role = "roles/eventarc.eventReceiver", member = local.sa_member.onfile, condition = null }
      # Cloud Storage events reach Eventarc through a Pub/Sub topic that Eventarc
      # creates and names itself, so the GCS service agent must publish on the
      # project (Google's documented requirement for storage triggers).
      "gcs-agent-pubsub-publisher" = { role = "roles/pubsub.publisher", member = local.gcs_service_agent, condition = null }
    } : {},
  )
}

resource "google_storage_bucket_iam_member" "members" {
  for_each = local.bucket_members

  bucket = each.value.bucket
  role   = each.value.role
  member = each.value.member
}

resource "google_pubsub_topic_iam_member" "members" {
  for_each = local.topic_members

  project = var.project
  topic   = each.value.topic
  role    = each.value.role
  member  = each.value.member
}

resource "google_pubsub_subscription_iam_member" "members" {
  for_each = local.subscription_members

  project      = var.project
  subscription = each.value.subscription
  role         = each.value.role
  member       = each.value.member
}

resource "google_project_iam_member" "members" {
  for_each = local.project_members

  project = var.project
  role    = each.value.role
  member  = each.value.member

  dynamic "condition" {
    for_each = each.value.condition == null ? [] : [each.value.condition]
    content {
      title       = condition.value.title
      description = condition.value.description
      expression  = condition.value.expression
    }
  }

  depends_on = [google_project_service.apis]
}

# Each function's account may invoke its own function's Cloud Run service and
# nothing else (gen2 functions are Cloud Run services of the same name).
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.functions

  project  = var.project
  location = var.region
  name     = local.function_resource[each.key].name
  role     = "roles/run.invoker"
  member   = local.sa_member[each.key]
}

# Pub/Sub mints the push subscriptions' OIDC tokens as its service agent; the
# grant is on each function account only, not project-wide.
resource "google_service_account_iam_member" "pubsub_token_creator" {
  for_each = local.functions

  service_account_id = local.service_account_resource[each.key].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

locals {
  service_account_resource = {
    onfile  = google_service_account.onfile
    merge   = google_service_account.merge
    compact = google_service_account.compact
  }
  function_resource = {
    onfile  = google_cloudfunctions2_function.onfile
    merge   = google_cloudfunctions2_function.merge
    compact = google_cloudfunctions2_function.compact
  }
}
