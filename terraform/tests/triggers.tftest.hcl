# The Datastream bucket's new files must reach the onfile function in both
# trigger modes, and nothing else may be wired in the mode that is off.
# Plan-level checks of what is known before apply; wiring.tftest.hcl checks the
# computed links (topic IDs, function URLs) after a mocked apply.

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

run "pubsub_mode_notifies_the_topic_pushed_to_onfile" {
  command = plan

  variables {
    trigger_mode      = "pubsub"
    datastream_prefix = "cdc/prod"
  }

  assert {
    condition     = length(google_storage_notification.datastream) == 1 && length(google_pubsub_topic.file_events) == 1 && length(google_pubsub_subscription.onfile) == 1
    error_message = "pubsub mode must create the bucket notification, its topic and the push subscription."
  }
  assert {
    condition = (
      google_storage_notification.datastream[0].bucket == "dsdelta-test-project-dsdelta-datastream" &&
      google_storage_notification.datastream[0].event_types == toset(["OBJECT_FINALIZE"]) &&
      google_storage_notification.datastream[0].object_name_prefix == "cdc/prod/" &&
      google_storage_notification.datastream[0].payload_format == "JSON_API_V1"
    )
    error_message = "The notification must report finalized objects under the Datastream prefix of the Datastream bucket."
  }
  assert {
    condition     = google_pubsub_subscription.onfile[0].push_config[0].oidc_token[0].service_account_email == "dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "The onfile push must authenticate as the onfile service account."
  }
  assert {
    condition     = length(google_cloudfunctions2_function.onfile.event_trigger) == 0
    error_message = "In pubsub mode onfile must not also have an Eventarc trigger (files would be staged twice)."
  }
  assert {
    condition     = google_pubsub_topic_iam_member.members["file-events-gcs-agent-publisher"].member == "serviceAccount:service-123456789012@gs-project-accounts.iam.gserviceaccount.com"
    error_message = "The Cloud Storage service agent must be able to publish notifications to the topic."
  }
  assert {
    condition     = !contains(keys(google_project_iam_member.members), "onfile-eventarc-event-receiver") && !contains(keys(google_project_iam_member.members), "gcs-agent-pubsub-publisher")
    error_message = "pubsub mode needs no project-level Eventarc or publisher grants."
  }
}

run "eventarc_mode_triggers_onfile_on_finalized_objects" {
  command = plan

  variables {
    trigger_mode = "eventarc"
  }

  assert {
    condition     = length(google_cloudfunctions2_function.onfile.event_trigger) == 1
    error_message = "eventarc mode must give onfile an event trigger."
  }
  assert {
    condition = (
      google_cloudfunctions2_function.onfile.event_trigger[0].event_type == "google.cloud.storage.object.v1.finalized" &&
      google_cloudfunctions2_function.onfile.event_trigger[0].retry_policy == "RETRY_POLICY_RETRY" &&
      google_cloudfunctions2_function.onfile.event_trigger[0].trigger_region == "us-central1" &&
      google_cloudfunctions2_function.onfile.event_trigger[0].service_account_email == "dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com"
    )
    error_message = "The trigger must deliver finalized objects, retry failures and run as the onfile account."
  }
  assert {
    condition = anytrue([
      for f in google_cloudfunctions2_function.onfile.event_trigger[0].event_filters :
      f.attribute == "bucket" && f.value == "dsdelta-test-project-dsdelta-datastream"
    ])
    error_message = "The trigger must filter on the Datastream bucket."
  }
  assert {
    condition     = length(google_storage_notification.datastream) == 0 && length(google_pubsub_topic.file_events) == 0 && length(google_pubsub_subscription.onfile) == 0
    error_message = "eventarc mode must not also create the notification path (files would be staged twice)."
  }
  assert {
    condition     = google_project_iam_member.members["onfile-eventarc-event-receiver"].role == "roles/eventarc.eventReceiver" && google_project_iam_member.members["onfile-eventarc-event-receiver"].member == "serviceAccount:dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "The onfile account must be allowed to receive Eventarc events."
  }
  assert {
    condition     = google_project_iam_member.members["gcs-agent-pubsub-publisher"].member == "serviceAccount:service-123456789012@gs-project-accounts.iam.gserviceaccount.com"
    error_message = "The Cloud Storage service agent must be able to publish the events Eventarc reads."
  }
}

run "eventarc_trigger_follows_an_existing_multi_region_bucket" {
  command = plan

  variables {
    trigger_mode               = "eventarc"
    create_datastream_bucket   = false
    datastream_bucket_name     = "existing-datastream-output"
    datastream_bucket_location = "US"
  }

  assert {
    condition     = length(google_storage_bucket.datastream) == 0
    error_message = "An existing Datastream bucket must not be created."
  }
  assert {
    condition     = google_cloudfunctions2_function.onfile.event_trigger[0].trigger_region == "us"
    error_message = "The trigger must live in the bucket's location."
  }
  assert {
    condition     = google_storage_bucket_iam_member.members["datastream-onfile-objectViewer"].bucket == "existing-datastream-output"
    error_message = "onfile must be granted read access on the existing bucket."
  }
}

run "datastream_module_is_created_for_a_postgresql_source_when_enabled" {
  command = plan

  variables {
    enable_apis                = true
    create_datastream_stream   = true
    datastream_source_password = "not-a-real-password"
    datastream = {
      source_type      = "postgresql"
      hostname         = "10.0.0.5"
      username         = "datastream"
      database         = "shop"
      publication      = "dsdelta_pub"
      replication_slot = "dsdelta_slot"
      include          = ["public"]
    }
  }

  assert {
    condition     = length(module.datastream) == 1
    error_message = "The Datastream module must be instantiated when create_datastream_stream is true."
  }
  assert {
    condition     = contains(keys(google_project_service.apis), "datastream.googleapis.com")
    error_message = "The Datastream API must be enabled with the module."
  }
}

run "datastream_module_is_created_for_a_sqlserver_source_when_enabled" {
  command = plan

  variables {
    create_datastream_stream   = true
    datastream_source_password = "not-a-real-password"
    datastream = {
      source_type          = "sqlserver"
      hostname             = "10.0.0.6"
      username             = "datastream"
      database             = "shop"
      include              = ["dbo"]
      sqlserver_cdc_method = "transaction_logs"
    }
  }

  assert {
    condition     = length(module.datastream) == 1
    error_message = "The Datastream module must be instantiated for a SQL Server source."
  }
  assert {
    condition     = module.datastream[0].cdc_method == "transaction_logs"
    error_message = "datastream.sqlserver_cdc_method must reach the module."
  }
}
