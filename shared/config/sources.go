package config

import (
	"fmt"
	"strings"

	"github.com/dsdelta/dsdelta/shared/datastream"
)

// Source is what the configuration says about one Datastream stream, found
// by its root path: a table id is unique within a stream, not across
// streams (every SQL Server database has a dbo schema; two MySQL servers
// can both have a shop database), so streams that share a lake are kept
// apart by namespace (docs/deploy.md "Several streams into one lake").
type Source struct {
	// Prefix is the stream's root path: in the cloud, an object name
	// prefix in the bucket ("datastream/sales-db/"); for dsdelta run, a
	// folder of the source folder ("sales-db/"). Leading and trailing
	// slashes do not matter; "" is the whole bucket or folder.
	Prefix string `yaml:"prefix" json:"prefix"`
	// Bucket, when set, is the bucket the prefix is in; empty matches a
	// file of any bucket, and the files of dsdelta run, which have none.
	Bucket string `yaml:"bucket" json:"bucket"`
	// Namespace puts the stream's tables under <lake>/<namespace>/: their
	// ids are <namespace>.<db>.<table>. Empty: no namespace.
	Namespace string `yaml:"namespace" json:"namespace"`
	// SQLServerTableID overrides the top-level sqlserver_table_id for the
	// stream's files.
	SQLServerTableID SQLServerTableID `yaml:"sqlserver_table_id" json:"sqlserver_table_id"`
}

// SQLServerTableID is how a SQL Server table's id names it.
type SQLServerTableID string

// SQL Server table id settings.
const (
	// SQLServerSchema names a table <schema>.<table> (dbo.orders), as
	// every source kind names its tables by schema (the default).
	SQLServerSchema SQLServerTableID = "schema"
	// SQLServerDatabase names a table <database>_<schema>.<table>
	// (sales_dbo.orders): the id stays two names, and as a stream reads
	// one database, the join is as unique as the schema within it.
	SQLServerDatabase SQLServerTableID = "database"
)

func (s SQLServerTableID) validate(key string) error {
	switch s {
	case "", SQLServerSchema, SQLServerDatabase:
		return nil
	}
	return fmt.Errorf("%s: %q is not %s or %s", key, s, SQLServerSchema, SQLServerDatabase)
}

// dirPrefix is a prefix as an object name prefix: "" or ending in '/'.
func dirPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%q has an empty, \".\" or \"..\" folder", p)
		}
	}
	return p + "/", nil
}

// validateSources checks every sources entry and that no two of them can
// claim one file: prefixes of the same bucket (or of any, when either
// names none) are neither equal nor nested.
func (c Config) validateSources() error {
	prefixes := make([]string, len(c.Sources))
	for i, s := range c.Sources {
		where := fmt.Sprintf("sources[%d]", i)
		p, err := dirPrefix(s.Prefix)
		if err != nil {
			return fmt.Errorf("%s.prefix: %w", where, err)
		}
		prefixes[i] = p
		if strings.Contains(s.Bucket, "/") {
			return fmt.Errorf("%s.bucket: %q is not a bucket name", where, s.Bucket)
		}
		if s.Namespace != "" {
			if err := datastream.ValidateNamespace(s.Namespace); err != nil {
				return fmt.Errorf("%s.namespace: %w", where, err)
			}
		}
		if err := s.SQLServerTableID.validate(where + ".sqlserver_table_id"); err != nil {
			return err
		}
		if s.Namespace == "" && s.SQLServerTableID == "" {
			return fmt.Errorf("%s (prefix %q) sets neither namespace nor sqlserver_table_id", where, s.Prefix)
		}
		for j, o := range c.Sources[:i] {
			q := prefixes[j]
			if s.Bucket != "" && o.Bucket != "" && s.Bucket != o.Bucket {
				continue
			}
			switch {
			case p == q:
				return fmt.Errorf("%s.prefix %q is also sources[%d].prefix", where, s.Prefix, j)
			case strings.HasPrefix(p, q):
				return fmt.Errorf("%s.prefix %q is inside sources[%d].prefix %q", where, s.Prefix, j, o.Prefix)
			case strings.HasPrefix(q, p):
				return fmt.Errorf("%s.prefix %q holds sources[%d].prefix %q", where, s.Prefix, j, o.Prefix)
			}
		}
	}
	return nil
}

// SourceOf returns the settings of the stream a file is in: the sources
// entry whose prefix (and bucket, when it names one) holds the file, or
// none (no namespace), with SQLServerTableID set from the top level when
// the entry does not set it.
func (c Config) SourceOf(bucket, name string) Source {
	var src Source
	for _, s := range c.Sources {
		p, err := dirPrefix(s.Prefix)
		if err == nil && strings.HasPrefix(name, p) && (s.Bucket == "" || s.Bucket == bucket) {
			src = s // validation leaves at most one
			break
		}
	}
	for _, v := range []SQLServerTableID{src.SQLServerTableID, c.SQLServerTableID, SQLServerSchema} {
		if v != "" {
			src.SQLServerTableID = v
			break
		}
	}
	return src
}

// HasNamespace reports whether a sources entry has the namespace name.
func (c Config) HasNamespace(name string) bool {
	for _, s := range c.Sources {
		if s.Namespace == name {
			return true
		}
	}
	return false
}
