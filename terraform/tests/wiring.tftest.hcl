# Computed wiring, checked after an apply against the mocked google provider
# (nothing is created; the mock invents IDs and URLs): notifications,
# subscriptions and the scheduler point at the right topics, and each push
# subscription calls the right function. Kept apart from the plan-only files
# because runs in one file share their state.

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

run "pubsub_mode_push_endpoint_is_the_onfile_function" {
  command = apply

  variables {
    trigger_mode = "pubsub"
  }

  assert {
    condition     = google_storage_notification.datastream[0].topic == google_pubsub_topic.file_events[0].id && google_pubsub_subscription.onfile[0].topic == google_pubsub_topic.file_events[0].id
    error_message = "The notification and the onfile subscription must use the same topic."
  }
  assert {
    condition     = google_pubsub_subscription.onfile[0].push_config[0].push_endpoint == "${google_cloudfunctions2_function.onfile.service_config[0].uri}/${google_pubsub_topic.file_events[0].id}"
    error_message = "The onfile subscription must push to the onfile function, at the topic path functions-framework-go expects."
  }
  assert {
    condition     = google_pubsub_subscription.merge.push_config[0].push_endpoint == "${google_cloudfunctions2_function.merge.service_config[0].uri}/${google_pubsub_topic.wake.id}"
    error_message = "Wake-ups must be pushed to the merge function."
  }
  assert {
    condition     = google_pubsub_subscription.compact.push_config[0].push_endpoint == "${google_cloudfunctions2_function.compact.service_config[0].uri}/${google_pubsub_topic.compact.id}"
    error_message = "Compaction ticks must be pushed to the compact function."
  }
  assert {
    condition     = google_cloud_scheduler_job.compact.pubsub_target[0].topic_name == google_pubsub_topic.compact.id
    error_message = "The scheduler must publish to the compaction topic."
  }
  assert {
    condition = alltrue([
      for s in [google_pubsub_subscription.onfile[0], google_pubsub_subscription.merge, google_pubsub_subscription.compact] :
      s.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter.id
    ])
    error_message = "Every push subscription must dead-letter to the dead-letter topic."
  }
  assert {
    condition = alltrue([
      for f in [google_cloudfunctions2_function.onfile, google_cloudfunctions2_function.merge, google_cloudfunctions2_function.compact] :
      f.service_config[0].environment_variables["DSDELTA_WAKE_TOPIC"] == google_pubsub_topic.wake.id &&
      f.service_config[0].environment_variables["DSDELTA_DEAD_LETTER_TOPIC"] == google_pubsub_topic.dead_letter.id
    ])
    error_message = "The functions must publish wake-ups and dead letters to the topics the subscriptions read."
  }
  assert {
    condition = (
      google_pubsub_subscription.onfile_reconcile.topic == google_pubsub_topic.reconcile.id &&
      google_pubsub_subscription.onfile_reconcile.push_config[0].push_endpoint == "${google_cloudfunctions2_function.onfile.service_config[0].uri}/${google_pubsub_topic.reconcile.id}" &&
      google_pubsub_subscription.onfile_reconcile.push_config[0].oidc_token[0].audience == google_cloudfunctions2_function.onfile.service_config[0].uri &&
      google_pubsub_subscription.onfile_reconcile.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter.id
    )
    error_message = "Reconciled files must be pushed from the reconcile topic to the onfile function, and dead-lettered like notifications."
  }
  assert {
    condition     = google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_TOPIC"] == google_pubsub_topic.reconcile.id
    error_message = "compact must publish reconciled files to the topic pushed to onfile."
  }
  assert {
    condition     = google_cloud_scheduler_job.reconcile.pubsub_target[0].topic_name == google_pubsub_topic.compact.id
    error_message = "Reconcile ticks must reach the compact function through the compaction topic."
  }
  assert {
    condition = (
      [for m in google_pubsub_topic_iam_member.members : m.member if m.topic == google_pubsub_topic.reconcile.id] == ["serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"] &&
      alltrue([for m in google_pubsub_topic_iam_member.members : m.role == "roles/pubsub.publisher" if m.topic == google_pubsub_topic.reconcile.id])
    )
    error_message = "The compact account must be the reconcile topic's only publisher."
  }
}

run "eventarc_mode_pushes_reconciled_files_to_onfile" {
  command = apply

  variables {
    trigger_mode = "eventarc"
  }

  assert {
    condition     = length(google_cloudfunctions2_function.onfile.event_trigger) == 1 && length(google_pubsub_subscription.onfile) == 0
    error_message = "eventarc mode must trigger onfile through Eventarc, without the notification subscription."
  }
  assert {
    condition = (
      google_pubsub_subscription.onfile_reconcile.topic == google_pubsub_topic.reconcile.id &&
      google_pubsub_subscription.onfile_reconcile.push_config[0].push_endpoint == "${google_cloudfunctions2_function.onfile.service_config[0].uri}/${google_pubsub_topic.reconcile.id}" &&
      google_pubsub_subscription.onfile_reconcile.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter.id
    )
    error_message = "In eventarc mode too, reconciled files must be pushed to the onfile function's URL."
  }
  assert {
    condition     = [for m in google_pubsub_topic_iam_member.members : m.member if m.topic == google_pubsub_topic.reconcile.id] == ["serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"]
    error_message = "The compact account must be the reconcile topic's only publisher in eventarc mode too."
  }
}
