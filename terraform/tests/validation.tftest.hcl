# Bad inputs are rejected at plan time with the variable's own message,
# before anything reaches the Google APIs.

mock_provider "google" {}

variables {
  project     = "dsdelta-test-project"
  enable_apis = false
}

run "rejects_an_unknown_trigger_mode" {
  command = plan
  variables {
    trigger_mode = "webhook"
  }
  expect_failures = [var.trigger_mode]
}

run "rejects_a_project_number_or_display_name_as_project" {
  command = plan
  variables {
    project = "My Project"
  }
  expect_failures = [var.project]
}

run "rejects_a_name_prefix_too_long_for_service_account_ids" {
  command = plan
  variables {
    name_prefix = "a-very-long-deployment-prefix"
  }
  expect_failures = [var.name_prefix]
}

run "rejects_fewer_delivery_attempts_than_pubsub_allows" {
  command = plan
  variables {
    max_delivery_attempts = 3
  }
  expect_failures = [var.max_delivery_attempts]
}

run "rejects_a_function_timeout_beyond_the_event_limit" {
  command = plan
  variables {
    merge_function = { timeout_seconds = 900 }
  }
  expect_failures = [var.merge_function]
}

run "rejects_a_memory_size_without_unit" {
  command = plan
  variables {
    onfile_function = { memory = "lots" }
  }
  expect_failures = [var.onfile_function]
}

run "rejects_a_datastream_prefix_with_a_leading_slash" {
  command = plan
  variables {
    datastream_prefix = "/datastream"
  }
  expect_failures = [var.datastream_prefix]
}

run "rejects_an_unsupported_datastream_file_format" {
  command = plan
  variables {
    datastream = { file_format = "parquet" }
  }
  expect_failures = [var.datastream]
}

run "rejects_an_unknown_datastream_source_type" {
  command = plan
  variables {
    datastream = { source_type = "mssql" }
  }
  expect_failures = [var.datastream]
}

run "rejects_an_unknown_sqlserver_cdc_method" {
  command = plan
  variables {
    datastream = { sqlserver_cdc_method = "polling" }
  }
  expect_failures = [var.datastream]
}

run "rejects_a_malformed_compaction_schedule" {
  command = plan
  variables {
    compaction_schedule = "every 6 hours please"
  }
  expect_failures = [var.compaction_schedule]
}

run "rejects_a_bucket_url_instead_of_a_bucket_name" {
  command = plan
  variables {
    lake_bucket_name = "gs://my-lake"
  }
  expect_failures = [var.lake_bucket_name]
}

run "rejects_a_merge_budget_that_outlasts_the_merge_timeout" {
  command = plan
  variables {
    merge_function       = { timeout_seconds = 120 }
    merge_budget_seconds = 200
  }
  expect_failures = [google_cloudfunctions2_function.merge]
}

run "rejects_a_reconcile_grace_in_words" {
  command = plan
  variables {
    reconcile_grace = "10 minutes"
  }
  expect_failures = [var.reconcile_grace]
}

run "rejects_a_reconcile_grace_in_days" {
  command = plan
  variables {
    reconcile_grace = "1d"
  }
  expect_failures = [var.reconcile_grace]
}

run "rejects_a_zero_reconcile_grace" {
  command = plan
  variables {
    reconcile_grace = "0s"
  }
  expect_failures = [var.reconcile_grace]
}

run "rejects_a_reconcile_lookback_below_ten_minutes" {
  command = plan
  variables {
    reconcile_lookback = "5m"
  }
  expect_failures = [var.reconcile_lookback]
}

run "rejects_a_reconcile_lookback_without_unit" {
  command = plan
  variables {
    reconcile_lookback = "7200"
  }
  expect_failures = [var.reconcile_lookback]
}

run "rejects_a_reconcile_since_without_time" {
  command = plan
  variables {
    reconcile_since = "2026-01-01"
  }
  expect_failures = [var.reconcile_since]
}

run "rejects_a_reconcile_since_without_offset" {
  command = plan
  variables {
    reconcile_since = "2026-01-01T00:00:00"
  }
  expect_failures = [var.reconcile_since]
}

run "rejects_a_reconcile_since_that_is_no_date" {
  command = plan
  variables {
    reconcile_since = "2026-02-30T00:00:00Z"
  }
  expect_failures = [var.reconcile_since]
}

run "rejects_a_malformed_reconcile_schedule" {
  command = plan
  variables {
    reconcile_schedule = "every 10 minutes"
  }
  expect_failures = [var.reconcile_schedule]
}

run "rejects_a_reconcile_lookback_shorter_than_the_grace" {
  command = plan
  variables {
    reconcile_grace    = "3h"
    reconcile_lookback = "2h"
  }
  expect_failures = [google_cloudfunctions2_function.compact]
}

run "accepts_rfc3339_instants_with_fractions_and_offsets" {
  command = plan
  variables {
    reconcile_since    = "2026-06-30T23:59:59.5-07:00"
    reconcile_grace    = "90s"
    reconcile_lookback = "168h"
  }
  assert {
    condition     = google_cloudfunctions2_function.compact.service_config[0].environment_variables["DSDELTA_RECONCILE_SINCE"] == "2026-06-30T23:59:59.5-07:00"
    error_message = "A valid RFC 3339 instant must be accepted and passed on unchanged."
  }
}
