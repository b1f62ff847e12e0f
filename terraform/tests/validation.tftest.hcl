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
