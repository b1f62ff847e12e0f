package delta

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Table feature names (Delta protocol, "Table Features").
const (
	FeatureAppendOnly          = "appendOnly"
	FeatureInvariants          = "invariants"
	FeatureCheckConstraints    = "checkConstraints"
	FeatureChangeDataFeed      = "changeDataFeed"
	FeatureGeneratedColumns    = "generatedColumns"
	FeatureColumnMapping       = "columnMapping"
	FeatureIdentityColumns     = "identityColumns"
	FeatureDeletionVectors     = "deletionVectors"
	FeatureTimestampNTZ        = "timestampNtz"
	FeatureDomainMetadata      = "domainMetadata"
	FeatureV2Checkpoint        = "v2Checkpoint"
	FeatureRowTracking         = "rowTracking"
	FeatureInCommitTimestamp   = "inCommitTimestamp"
	FeatureVacuumProtocolCheck = "vacuumProtocolCheck"
	FeatureTypeWidening        = "typeWidening"
	FeatureTypeWideningPreview = "typeWidening-preview"
)

// readableFeatures are the reader features whose data this package reads
// correctly (deletion vectors and column mapping are applied by the Parquet
// reader side of the package, V2 checkpoints by log replay).
var readableFeatures = []string{
	FeatureDeletionVectors, FeatureColumnMapping, FeatureTimestampNTZ,
	FeatureTypeWidening, FeatureTypeWideningPreview, FeatureVacuumProtocolCheck,
	FeatureV2Checkpoint,
}

// writableFeatures are the writer features whose obligations this package
// honours on every commit: appendOnly (removes with dataChange refused),
// invariants (writes refused while any column carries one) and
// deletionVectors (PROTOCOL.md "Deletion Vectors", "Writer Requirements for
// Deletion Vectors": a file's DV changes by removing the file with its old
// vector and adding it with the new one in one commit, which commit
// validation checks; every reader of this package applies vectors).
var writableFeatures = []string{FeatureAppendOnly, FeatureInvariants, FeatureDeletionVectors}

// writableReaderFeatures are the reader-writer features this package can
// also write.
var writableReaderFeatures = []string{FeatureDeletionVectors}

// vacuumSafeWriterFeatures are writer features that cannot make VACUUM
// delete a live file when it keeps every file the snapshot references
// (including deletion vector files). Anything else (e.g. an unknown future
// feature) makes Vacuum refuse, as vacuumProtocolCheck demands.
// v2Checkpoint only changes files below _delta_log, which vacuum skips.
var vacuumSafeWriterFeatures = []string{
	FeatureAppendOnly, FeatureInvariants, FeatureCheckConstraints, FeatureChangeDataFeed,
	FeatureGeneratedColumns, FeatureColumnMapping, FeatureIdentityColumns, FeatureDeletionVectors,
	FeatureTimestampNTZ, FeatureDomainMetadata, FeatureRowTracking, FeatureInCommitTimestamp,
	FeatureVacuumProtocolCheck, FeatureTypeWidening, FeatureTypeWideningPreview, FeatureV2Checkpoint,
}

// CheckRead returns an error wrapping ErrUnsupportedFeature, naming the
// version or features, when this package cannot read a table with protocol p.
func (p Protocol) CheckRead() error {
	switch {
	case p.MinReaderVersion < 1:
		return fmt.Errorf("%w: invalid minReaderVersion %d", ErrUnsupportedFeature, p.MinReaderVersion)
	case p.MinReaderVersion > 3:
		return fmt.Errorf("%w: minReaderVersion %d (this reader supports 1 to 3)", ErrUnsupportedFeature, p.MinReaderVersion)
	case p.MinReaderVersion < 3:
		return nil
	}
	if missing := notIn(p.ReaderFeatures, readableFeatures); len(missing) > 0 {
		return fmt.Errorf("%w: reader feature(s) %s", ErrUnsupportedFeature, strings.Join(missing, ", "))
	}
	return nil
}

// CheckWrite returns an error wrapping ErrUnsupportedFeature when this
// package cannot commit to a table with protocol p and metadata md: the
// table must be readable and need nothing beyond writer version 2 semantics
// (appendOnly, invariants) and deletion vectors, either through
// minWriterVersion ≤ 2 or a writer version 7 feature list limited to
// writableFeatures (and reader features to writableReaderFeatures). Tables whose writer
// version 3–6 activates no feature in md are also refused because the
// version alone obliges writers to honour properties we do not check.
func (p Protocol) CheckWrite(md Metadata) error {
	if err := p.CheckRead(); err != nil {
		return err
	}
	if p.MinReaderVersion == 3 {
		// Every reader feature is also a writer feature; reading it is not
		// enough to write it.
		if unwritable := notIn(p.ReaderFeatures, writableReaderFeatures); len(unwritable) > 0 {
			return fmt.Errorf("%w: writing reader feature(s) %s", ErrUnsupportedFeature, strings.Join(unwritable, ", "))
		}
	}
	var missing []string
	switch {
	case p.MinWriterVersion < 1:
		return fmt.Errorf("%w: invalid minWriterVersion %d", ErrUnsupportedFeature, p.MinWriterVersion)
	case p.MinWriterVersion <= 2:
	case p.MinWriterVersion == 7:
		missing = notIn(p.WriterFeatures, writableFeatures)
	default:
		missing = legacyWriterFeatures(p.MinWriterVersion)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: writer feature(s) %s (minWriterVersion %d)", ErrUnsupportedFeature, strings.Join(missing, ", "), p.MinWriterVersion)
	}
	return checkMetadataWritable(md)
}

// Supports reports whether the protocol supports table feature f: listed
// among the writer features at writer version 7 (PROTOCOL.md "Table
// Features": a supported feature is listed; it is active when its table
// property says so).
func (p Protocol) Supports(f string) bool {
	return p.MinWriterVersion == 7 && slices.Contains(p.WriterFeatures, f)
}

// WithReaderWriterFeature returns p upgraded to reader version 3 and writer
// version 7 with reader-writer feature f listed in both feature lists
// (PROTOCOL.md "Table Features", "Table Features for New and Existing
// Tables"): the features the old versions implied are listed explicitly,
// as the protocol demands of an upgrade to version 7.
func (p Protocol) WithReaderWriterFeature(f string) Protocol {
	out := Protocol{MinReaderVersion: 3, MinWriterVersion: 7}
	if p.MinReaderVersion == 3 {
		out.ReaderFeatures = slices.Clone(p.ReaderFeatures)
	} else if p.MinReaderVersion == 2 {
		out.ReaderFeatures = []string{FeatureColumnMapping}
	}
	if p.MinWriterVersion == 7 {
		out.WriterFeatures = slices.Clone(p.WriterFeatures)
	} else {
		if p.MinWriterVersion >= 2 {
			out.WriterFeatures = append(out.WriterFeatures, FeatureAppendOnly, FeatureInvariants)
		}
		out.WriterFeatures = append(out.WriterFeatures, legacyWriterFeatures(min(p.MinWriterVersion, 6))...)
	}
	if !slices.Contains(out.ReaderFeatures, f) {
		out.ReaderFeatures = append(out.ReaderFeatures, f)
	}
	if !slices.Contains(out.WriterFeatures, f) {
		out.WriterFeatures = append(out.WriterFeatures, f)
	}
	return out
}

// legacyWriterFeatures lists the features a legacy writer version implies
// beyond version 2.
func legacyWriterFeatures(v int) []string {
	var out []string
	if v >= 3 {
		out = append(out, FeatureCheckConstraints)
	}
	if v >= 4 {
		out = append(out, FeatureChangeDataFeed, FeatureGeneratedColumns)
	}
	if v >= 5 {
		out = append(out, FeatureColumnMapping)
	}
	if v >= 6 {
		out = append(out, FeatureIdentityColumns)
	}
	if v > 7 {
		out = append(out, fmt.Sprintf("writer version %d", v))
	}
	return out
}

// checkMetadataWritable refuses metadata that activates a feature we cannot
// honour even when the protocol does not list it (a property set on a
// lower-protocol table by a careless writer still binds us).
func checkMetadataWritable(md Metadata) error {
	var missing []string
	for k, v := range md.Configuration {
		switch {
		case strings.HasPrefix(k, constraintPropertyPrefix):
			missing = appendOnce(missing, FeatureCheckConstraints)
		case k == PropEnableChangeDataFeed && strings.EqualFold(v, "true"):
			missing = appendOnce(missing, FeatureChangeDataFeed)
		case k == PropColumnMappingMode && !strings.EqualFold(v, "none") && v != "":
			missing = appendOnce(missing, FeatureColumnMapping)
		}
	}
	if md.SchemaString != "" {
		schema, err := value.ParseSchema(md.SchemaString)
		if err != nil {
			return fmt.Errorf("check writable schema: %w", err)
		}
		walkFields(schema, func(f value.Field) {
			for k := range f.Metadata {
				switch {
				case k == invariantsMetadataKey:
					missing = appendOnce(missing, FeatureInvariants+" (column "+f.Name+")")
				case k == generationExpressionKey:
					missing = appendOnce(missing, FeatureGeneratedColumns)
				case strings.HasPrefix(k, identityMetadataKeyPrefix):
					missing = appendOnce(missing, FeatureIdentityColumns)
				}
			}
			if f.Type == value.TimestampNTZ {
				missing = appendOnce(missing, FeatureTimestampNTZ)
			}
		})
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: table metadata needs %s", ErrUnsupportedFeature, strings.Join(missing, ", "))
	}
	return nil
}

// CheckVacuum returns an error when vacuuming a table with protocol p could
// delete files that a feature we do not know still needs.
func (p Protocol) CheckVacuum() error {
	if err := p.CheckRead(); err != nil {
		return err
	}
	if p.MinWriterVersion != 7 {
		if p.MinWriterVersion > 7 {
			return fmt.Errorf("%w: vacuum with minWriterVersion %d", ErrUnsupportedFeature, p.MinWriterVersion)
		}
		return nil
	}
	if missing := notIn(p.WriterFeatures, vacuumSafeWriterFeatures); len(missing) > 0 {
		return fmt.Errorf("%w: vacuum with writer feature(s) %s", ErrUnsupportedFeature, strings.Join(missing, ", "))
	}
	return nil
}

// walkFields calls fn for every field of st, nested structs (also inside
// arrays and maps) included.
func walkFields(st value.StructType, fn func(value.Field)) {
	for _, f := range st.Fields {
		fn(f)
		walkType(f.Type, fn)
	}
}

func walkType(t value.Type, fn func(value.Field)) {
	switch x := t.(type) {
	case value.StructType:
		walkFields(x, fn)
	case value.ArrayType:
		walkType(x.Element, fn)
	case value.MapType:
		walkType(x.Key, fn)
		walkType(x.Value, fn)
	}
}

// notIn lists the features of list that allowed does not hold.
func notIn(list, allowed []string) []string {
	var out []string
	for _, f := range list {
		if !slices.Contains(allowed, f) {
			out = append(out, f)
		}
	}
	return out
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// DeletionVectorsWritable reports whether writers may create deletion
// vectors in the snapshot's table: the protocol supports the feature and
// delta.enableDeletionVectors is true (PROTOCOL.md "Deletion Vectors").
func (s *Snapshot) DeletionVectorsWritable() bool {
	return s.Protocol().Supports(FeatureDeletionVectors) && strings.EqualFold(s.Configuration()[PropEnableDeletionVectors], "true")
}
