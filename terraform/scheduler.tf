# Ticks of the compact function: Cloud Scheduler publishes to the compaction
# topic, whose push subscription (pubsub.tf) calls the compact function.
# Cloud Scheduler publishes as its own service agent, which already holds
# publish rights. The message body names the work (compaction_message):
#   {}                       everything: reconcile and maintenance of every table;
#   {"tasks":["reconcile"]}  the reconcile only.
#
# Both jobs share the compaction topic on purpose: it has one publisher (the
# scheduler) and one consumer (compact), so a topic of its own would narrow
# nobody's rights and only add a subscription and another grant to the
# Pub/Sub service agent.
resource "google_cloud_scheduler_job" "compact" {
  project     = var.project
  region      = var.region
  name        = "${local.prefix}-compact"
  description = "dsdelta: periodic reconcile, compaction, checkpoints, vacuum and expiry of every table."
  schedule    = var.compaction_schedule
  time_zone   = var.compaction_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.compact.id
    data       = base64encode(var.compaction_message)
    attributes = {
      origin = "cloud-scheduler"
    }
  }

  # Publishing rarely fails; when it does, the next tick does the same work.
  retry_config {
    retry_count = 3
  }

  depends_on = [google_project_service.apis]
}

# Reconcile tick, more often than compaction: lists the Datastream bucket and
# hands the files no notification announced to onfile (pubsub.tf, reconcile
# topic), a bounded number per tick.
resource "google_cloud_scheduler_job" "reconcile" {
  project     = var.project
  region      = var.region
  name        = "${local.prefix}-reconcile"
  description = "dsdelta: stages the Datastream files whose notification was lost (reconcile)."
  schedule    = var.reconcile_schedule
  time_zone   = var.compaction_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.compact.id
    data       = base64encode(jsonencode({ tasks = ["reconcile"] }))
    attributes = {
      origin = "cloud-scheduler"
    }
  }

  retry_config {
    retry_count = 3
  }

  depends_on = [google_project_service.apis]
}
