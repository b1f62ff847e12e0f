# Security invariants of the default deployment, checked on the plan with a
# mocked google provider (no credentials, no API calls).
#
# enable_apis = false lets the project and service-agent data sources be read
# at plan time (from the mocks below) instead of being deferred behind the API
# enablement, so every IAM member is known and can be inspected.

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

run "each_function_runs_as_its_own_service_account" {
  command = plan

  assert {
    condition     = google_cloudfunctions2_function.onfile.service_config[0].service_account_email == "dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "onfile must run as the dsdelta-onfile service account."
  }
  assert {
    condition     = google_cloudfunctions2_function.merge.service_config[0].service_account_email == "dsdelta-merge@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "merge must run as the dsdelta-merge service account."
  }
  assert {
    condition     = google_cloudfunctions2_function.compact.service_config[0].service_account_email == "dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "compact must run as the dsdelta-compact service account."
  }
  assert {
    condition = length(toset([
      google_cloudfunctions2_function.onfile.service_config[0].service_account_email,
      google_cloudfunctions2_function.merge.service_config[0].service_account_email,
      google_cloudfunctions2_function.compact.service_config[0].service_account_email,
    ])) == 3
    error_message = "The three functions must not share a service account."
  }
  assert {
    condition = length(toset([
      google_service_account.onfile.account_id,
      google_service_account.merge.account_id,
      google_service_account.compact.account_id,
    ])) == 3
    error_message = "One service account must be created per function."
  }
}

run "no_iam_binding_is_public_or_project_wide_admin" {
  command = plan

  assert {
    condition = alltrue(flatten([
      [for m in google_storage_bucket_iam_member.members : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
      [for m in google_pubsub_topic_iam_member.members : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
      [for m in google_pubsub_subscription_iam_member.members : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
      [for m in google_project_iam_member.members : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
      [for m in google_cloud_run_v2_service_iam_member.invoker : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
      [for m in google_service_account_iam_member.pubsub_token_creator : !contains(["allUsers", "allAuthenticatedUsers"], m.member)],
    ]))
    error_message = "No IAM binding may name allUsers or allAuthenticatedUsers."
  }
  assert {
    condition = alltrue([
      for m in google_project_iam_member.members : !contains(["roles/owner", "roles/editor", "roles/viewer", "roles/storage.admin", "roles/pubsub.admin", "roles/datastore.owner", "roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountUser"], m.role)
    ])
    error_message = "No basic or admin role may be granted at project level."
  }
  assert {
    # In pubsub mode the only project-level grants are Firestore access,
    # each limited by an IAM condition to the dsdelta database.
    condition = alltrue([
      for m in google_project_iam_member.members : m.role == "roles/datastore.user" && length(m.condition) == 1 && strcontains(m.condition[0].expression, "projects/dsdelta-test-project/databases/dsdelta")
    ])
    error_message = "Project-level grants must be roles/datastore.user limited to the dsdelta database."
  }
  assert {
    condition     = alltrue([for k, m in google_cloud_run_v2_service_iam_member.invoker : m.role == "roles/run.invoker" && m.member == "serviceAccount:dsdelta-${k}@dsdelta-test-project.iam.gserviceaccount.com" && m.name == "dsdelta-${k}"])
    error_message = "Each function's service account may invoke its own function and no other."
  }
  assert {
    condition     = alltrue([for m in google_storage_bucket_iam_member.members : contains(["roles/storage.objectViewer", "roles/storage.objectUser"], m.role)])
    error_message = "Bucket grants must be object-level roles, never bucket admin."
  }
  assert {
    condition = alltrue([
      for m in google_storage_bucket_iam_member.members : m.bucket == "dsdelta-test-project-dsdelta-datastream" ? (m.role == "roles/storage.objectViewer" && contains(["serviceAccount:dsdelta-onfile@dsdelta-test-project.iam.gserviceaccount.com", "serviceAccount:dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"], m.member)) : true
    ])
    error_message = "Only onfile (staging) and compact (the reconcile's listing) may read the Datastream bucket, and only read it."
  }
  assert {
    condition = alltrue([
      for m in google_pubsub_topic_iam_member.members : m.role == "roles/pubsub.publisher"
    ])
    error_message = "Topic grants must be publish-only."
  }
}

run "every_bucket_enforces_public_access_prevention" {
  command = plan

  assert {
    condition = alltrue([
      for b in concat(google_storage_bucket.datastream, google_storage_bucket.lake, [google_storage_bucket.function_source]) :
      b.public_access_prevention == "enforced" && b.uniform_bucket_level_access == true
    ])
    error_message = "Every bucket must enforce public access prevention and uniform bucket-level access."
  }
  assert {
    condition     = length(google_storage_bucket.datastream) == 1 && length(google_storage_bucket.lake) == 1
    error_message = "By default both the Datastream and the lake bucket are created."
  }
  assert {
    condition = anytrue([
      for r in google_storage_bucket.lake[0].lifecycle_rule :
      one(r.action).type == "Delete" && one(r.condition).age == 7 && contains(one(r.condition).matches_prefix, "_staging/")
    ])
    error_message = "The lake bucket must expire leftover _staging/ objects after staging_retention_days."
  }
  assert {
    condition     = one(google_storage_bucket.lake[0].versioning).enabled == false
    error_message = "Object versioning must stay off on the lake bucket."
  }
}

run "every_push_subscription_has_retry_and_dead_letter_policies" {
  command = plan

  assert {
    condition = alltrue([
      for s in concat(google_pubsub_subscription.onfile, [google_pubsub_subscription.onfile_reconcile, google_pubsub_subscription.merge, google_pubsub_subscription.compact]) :
      length(s.dead_letter_policy) == 1 && s.dead_letter_policy[0].max_delivery_attempts == 10
    ])
    error_message = "Every push subscription must dead-letter after max_delivery_attempts."
  }
  assert {
    condition = alltrue([
      for s in concat(google_pubsub_subscription.onfile, [google_pubsub_subscription.onfile_reconcile, google_pubsub_subscription.merge, google_pubsub_subscription.compact]) :
      length(s.retry_policy) == 1 && s.retry_policy[0].minimum_backoff == "10s" && s.retry_policy[0].maximum_backoff == "600s"
    ])
    error_message = "Every push subscription must retry with exponential backoff."
  }
  assert {
    condition     = google_pubsub_subscription.merge.push_config[0].oidc_token[0].service_account_email == "dsdelta-merge@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "The merge push must authenticate as the merge service account."
  }
  assert {
    condition     = google_pubsub_subscription.merge.ack_deadline_seconds == 570 && google_pubsub_subscription.onfile[0].ack_deadline_seconds == 330
    error_message = "A push subscription's ack deadline must cover the function timeout (capped at 600s)."
  }
  assert {
    condition     = google_pubsub_subscription.dead_letter.retain_acked_messages == true && google_pubsub_subscription.dead_letter.expiration_policy[0].ttl == ""
    error_message = "The dead-letter subscription must keep its messages and never expire."
  }
  assert {
    condition     = google_pubsub_topic_iam_member.members["dead-letter-pubsub-agent-publisher"].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
    error_message = "The Pub/Sub service agent must be able to publish dead letters."
  }
  assert {
    condition = alltrue([
      for m in google_pubsub_subscription_iam_member.members : m.role == "roles/pubsub.subscriber" && m.member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
    ]) && length(google_pubsub_subscription_iam_member.members) == 4
    error_message = "The Pub/Sub service agent must be a subscriber of each push subscription (needed to forward dead letters)."
  }
}

run "firestore_database_is_native_with_a_ttl_on_the_registry" {
  command = plan

  assert {
    condition     = google_firestore_database.dsdelta[0].type == "FIRESTORE_NATIVE" && google_firestore_database.dsdelta[0].name == "dsdelta"
    error_message = "The Firestore database must be a native-mode database named after firestore_database."
  }
  assert {
    condition     = google_firestore_field.ttl["dsdelta_files"].field == "expireAt" && length(google_firestore_field.ttl["dsdelta_files"].ttl_config) == 1
    error_message = "The registry collection must have a TTL policy on expireAt."
  }
  assert {
    condition     = google_firestore_field.ttl["dsdelta_batches"].field == "expireAt"
    error_message = "Finished batches must expire by TTL on expireAt too."
  }
  assert {
    condition = (
      google_firestore_index.files_by_table_state.collection == "dsdelta_files" &&
      [for f in google_firestore_index.files_by_table_state.fields : f.field_path] == ["table", "state", "arrivalSeq"] &&
      [for f in google_firestore_index.files_by_table.fields : f.field_path] == ["table", "arrivalSeq"]
    )
    error_message = "The registry's composite indexes must match its queries."
  }
  assert {
    condition     = !contains(keys(google_firestore_field.ttl), "dsdelta_leases")
    error_message = "Leases must not be expired by TTL (their fencing token must survive)."
  }
}

run "functions_get_their_configuration_from_the_environment" {
  command = plan

  assert {
    condition = alltrue([
      for f in [google_cloudfunctions2_function.onfile, google_cloudfunctions2_function.merge, google_cloudfunctions2_function.compact] :
      f.service_config[0].environment_variables["DSDELTA_LAKE_URL"] == "gs://dsdelta-test-project-dsdelta-lake" &&
      f.service_config[0].environment_variables["DSDELTA_SOURCE_BUCKET"] == "dsdelta-test-project-dsdelta-datastream" &&
      f.service_config[0].environment_variables["DSDELTA_SOURCE_PREFIX"] == "datastream" &&
      f.service_config[0].environment_variables["DSDELTA_FIRESTORE_DATABASE"] == "dsdelta" &&
      f.service_config[0].environment_variables["DSDELTA_PROJECT"] == "dsdelta-test-project" &&
      f.service_config[0].environment_variables["DSDELTA_MERGE_BUDGET"] == "432s" &&
      !contains(keys(f.service_config[0].environment_variables), "DSDELTA_CONFIG")
    ])
    error_message = "Every function must receive the source, lake, Firestore and budget settings."
  }
  assert {
    condition = (
      google_cloudfunctions2_function.onfile.service_config[0].environment_variables["GOMEMLIMIT"] == "819MiB" &&
      google_cloudfunctions2_function.merge.service_config[0].environment_variables["GOMEMLIMIT"] == "819MiB" &&
      google_cloudfunctions2_function.compact.service_config[0].environment_variables["GOMEMLIMIT"] == "1638MiB"
    )
    error_message = "Each function's Go memory limit must be four fifths of its memory (1Gi, 1Gi, 2Gi by default)."
  }
  assert {
    condition = alltrue([
      for f in [google_cloudfunctions2_function.onfile, google_cloudfunctions2_function.merge, google_cloudfunctions2_function.compact] :
      f.build_config[0].runtime == "go126" && f.service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY"
    ])
    error_message = "Functions must use the go126 runtime and accept internal traffic only."
  }
  assert {
    condition = (
      google_cloudfunctions2_function.onfile.build_config[0].entry_point == "OnFile" &&
      google_cloudfunctions2_function.merge.build_config[0].entry_point == "Merge" &&
      google_cloudfunctions2_function.compact.build_config[0].entry_point == "Compact"
    )
    error_message = "Each function must run its own entry point."
  }
  assert {
    condition     = output.status_command == "dsdelta status --project dsdelta-test-project --lake gs://dsdelta-test-project-dsdelta-lake --firestore-database dsdelta"
    error_message = "status_command must name the project, the lake and the Firestore database."
  }
}

run "compaction_is_scheduled_into_its_topic" {
  command = plan

  assert {
    condition     = google_cloud_scheduler_job.compact.schedule == "15 * * * *" && length(google_cloud_scheduler_job.compact.pubsub_target) == 1
    error_message = "The scheduler must publish compaction ticks on compaction_schedule."
  }
  assert {
    condition     = google_pubsub_subscription.compact.push_config[0].oidc_token[0].service_account_email == "dsdelta-compact@dsdelta-test-project.iam.gserviceaccount.com"
    error_message = "The compaction push must authenticate as the compact service account."
  }
}

run "monitoring_counts_quarantines_lag_and_errors" {
  command = plan

  assert {
    condition     = strcontains(google_logging_metric.quarantined_files.filter, "jsonPayload.event=\"quarantined\"") && strcontains(google_logging_metric.quarantined_files.filter, "resource.labels.service_name=\"dsdelta-onfile\"")
    error_message = "The quarantine metric must count the functions' quarantined events."
  }
  assert {
    condition     = google_logging_metric.merge_lag.value_extractor == "EXTRACT(jsonPayload.lag_seconds)" && google_logging_metric.merge_lag.metric_descriptor[0].value_type == "DISTRIBUTION"
    error_message = "The merge lag metric must be a distribution of lag_seconds."
  }
  assert {
    condition     = strcontains(google_logging_metric.function_errors.filter, "severity>=ERROR")
    error_message = "The error metric must count error-level entries."
  }
  assert {
    condition     = length(google_monitoring_alert_policy.quarantined_files) == 1 && length(google_monitoring_alert_policy.reconciled_files) == 1 && length(google_monitoring_alert_policy.merge_lag) == 1 && length(google_monitoring_alert_policy.function_errors) == 1 && length(google_monitoring_alert_policy.dead_letters) == 1
    error_message = "Alert policies must exist for quarantines, reconciled files, lag, errors and dead letters."
  }
}

run "plan_works_with_api_enablement_and_deferred_service_agents" {
  command = plan

  variables {
    enable_apis = true
  }

  assert {
    condition     = length(google_project_service.apis) == 12 && alltrue([for s in google_project_service.apis : s.disable_on_destroy == false])
    error_message = "The required APIs must be enabled and never disabled on destroy."
  }
  assert {
    condition     = length(module.datastream) == 0
    error_message = "The Datastream stream must be off by default."
  }
}
