# The Datastream module on its own, against the mocked google provider: each
# source type gets its own connection profile block and source config, and
# nothing of another engine. The root configuration's tests (triggers,
# validation) only see the module from outside; these runs plan the module
# itself, so they can look inside its resources.

mock_provider "google" {}

variables {
  project        = "dsdelta-test-project"
  project_number = "123456789012"
  region         = "europe-west1"
  name_prefix    = "dsdelta"
  bucket         = "dsdelta-test-project-dsdelta-datastream"
  prefix         = "datastream"
  hostname       = "10.0.0.5"
  username       = "datastream"
  password       = "not-a-real-password"
  database       = "shop"
  include        = ["dbo", "sales"]
}

run "a_sqlserver_source_gets_a_sql_server_profile_on_port_1433" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "sqlserver"
  }

  assert {
    condition = (
      length(google_datastream_connection_profile.source.sql_server_profile) == 1 &&
      google_datastream_connection_profile.source.sql_server_profile[0].hostname == "10.0.0.5" &&
      google_datastream_connection_profile.source.sql_server_profile[0].port == 1433 &&
      google_datastream_connection_profile.source.sql_server_profile[0].username == "datastream" &&
      google_datastream_connection_profile.source.sql_server_profile[0].database == "shop"
    )
    error_message = "A SQL Server source must be a sql_server_profile on the SQL Server port, naming the database."
  }
  assert {
    condition = (
      length(google_datastream_connection_profile.source.mysql_profile) == 0 &&
      length(google_datastream_connection_profile.source.postgresql_profile) == 0 &&
      length(google_datastream_connection_profile.source.oracle_profile) == 0
    )
    error_message = "A SQL Server source must have no other engine's profile (the provider allows exactly one)."
  }
}

run "a_sqlserver_stream_reads_change_tables_by_default" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "sqlserver"
  }

  assert {
    condition = (
      length(google_datastream_stream.this.source_config[0].sql_server_source_config) == 1 &&
      length(google_datastream_stream.this.source_config[0].mysql_source_config) == 0 &&
      length(google_datastream_stream.this.source_config[0].postgresql_source_config) == 0 &&
      length(google_datastream_stream.this.source_config[0].oracle_source_config) == 0
    )
    error_message = "A SQL Server stream must have a sql_server_source_config and no other engine's config."
  }
  assert {
    condition     = google_datastream_stream.this.source_config[0].sql_server_source_config[0].include_objects[0].schemas[*].schema == tolist(["dbo", "sales"])
    error_message = "The stream must include the listed SQL Server schemas."
  }
  assert {
    condition = (
      length(google_datastream_stream.this.source_config[0].sql_server_source_config[0].change_tables) == 1 &&
      length(google_datastream_stream.this.source_config[0].sql_server_source_config[0].transaction_logs) == 0
    )
    error_message = "By default the stream must read the CDC change tables, and only them."
  }
  assert {
    condition     = output.cdc_method == "change_tables"
    error_message = "The module must report the CDC method it configured."
  }
}

run "a_sqlserver_stream_can_read_the_transaction_logs" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type          = "sqlserver"
    sqlserver_cdc_method = "transaction_logs"
  }

  assert {
    condition = (
      length(google_datastream_stream.this.source_config[0].sql_server_source_config[0].transaction_logs) == 1 &&
      length(google_datastream_stream.this.source_config[0].sql_server_source_config[0].change_tables) == 0
    )
    error_message = "sqlserver_cdc_method = transaction_logs must read the transaction logs, and only them (the two conflict)."
  }
  assert {
    condition     = output.cdc_method == "transaction_logs"
    error_message = "The module must report the CDC method it configured."
  }
}

run "a_sqlserver_stream_without_include_streams_every_schema" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "sqlserver"
    include     = []
    port        = 14330
  }

  assert {
    condition     = length(google_datastream_stream.this.source_config[0].sql_server_source_config[0].include_objects) == 0
    error_message = "An empty include list must leave include_objects out (an empty one would fail: schemas needs at least one)."
  }
  assert {
    condition     = google_datastream_connection_profile.source.sql_server_profile[0].port == 14330
    error_message = "An explicit port must win over the SQL Server default."
  }
}

run "a_sqlserver_source_needs_its_database" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "sqlserver"
    database    = ""
  }

  expect_failures = [google_datastream_stream.this]
}

run "rejects_an_unknown_sqlserver_cdc_method" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type          = "sqlserver"
    sqlserver_cdc_method = "polling"
  }

  expect_failures = [var.sqlserver_cdc_method]
}

run "rejects_an_unknown_source_type" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "mssql"
  }

  expect_failures = [var.source_type]
}

run "a_mysql_source_has_no_sql_server_config" {
  command = plan

  module {
    source = "./modules/datastream"
  }

  variables {
    source_type = "mysql"
  }

  assert {
    condition = (
      length(google_datastream_connection_profile.source.mysql_profile) == 1 &&
      google_datastream_connection_profile.source.mysql_profile[0].port == 3306 &&
      length(google_datastream_connection_profile.source.sql_server_profile) == 0
    )
    error_message = "A MySQL source must keep its mysql_profile on the MySQL port and get no sql_server_profile."
  }
  assert {
    condition = (
      length(google_datastream_stream.this.source_config[0].mysql_source_config) == 1 &&
      length(google_datastream_stream.this.source_config[0].sql_server_source_config) == 0
    )
    error_message = "A MySQL stream must have a mysql_source_config and no sql_server_source_config."
  }
  assert {
    condition     = output.cdc_method == null
    error_message = "Only SQL Server streams have a CDC method to report."
  }
}
