// Package config holds dsdelta's configuration: defaults, loading from a
// YAML or JSON file (YAML is a superset, so one parser reads both) and from
// DSDELTA_* environment variables, and validation with errors that name the
// offending setting.
package config
