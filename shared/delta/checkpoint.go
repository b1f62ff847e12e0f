package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
)

// Checkpoints are read column by column from generic Parquet rows, by
// column name, so that Spark's files (with stats_parsed, tags, 2- or 3-level
// lists, int32 or int64 counters) and ours decode alike and missing columns
// read as null. They are written through typed structs whose every field is
// an optional pointer, so each row has exactly one non-null top-level column.

// ckCol enumerates the logical checkpoint columns we decode: scalar
// leaves, map keys/values and list elements. Resolving them to leaf column
// indexes once per file keeps the per-row work to slice indexing.
type ckCol int

const (
	cTxnAppID ckCol = iota
	cTxnVersion
	cTxnLastUpdated
	cAddPath
	cAddPVKey
	cAddPVValue
	cAddSize
	cAddModificationTime
	cAddDataChange
	cAddTagsKey
	cAddTagsValue
	cAddStats
	cAddBaseRowID
	cAddDefaultRowCommitVersion
	cAddClusteringProvider
	cAddDV // first of the six deletion vector columns, in dvFields order
	_
	_
	_
	_
	_
	cRemovePath
	cRemoveDeletionTimestamp
	cRemoveDataChange
	cRemoveExtendedFileMetadata
	cRemovePVKey
	cRemovePVValue
	cRemoveSize
	cRemoveStats
	cRemoveTagsKey
	cRemoveTagsValue
	cRemoveBaseRowID
	cRemoveDefaultRowCommitVersion
	cRemoveDV
	_
	_
	_
	_
	_
	cMetaID
	cMetaName
	cMetaDescription
	cMetaFormatProvider
	cMetaFormatOptionsKey
	cMetaFormatOptionsValue
	cMetaSchemaString
	cMetaPartitionColumns
	cMetaConfigurationKey
	cMetaConfigurationValue
	cMetaCreatedTime
	cProtoMinReader
	cProtoMinWriter
	cProtoReaderFeatures
	cProtoWriterFeatures
	cDomain
	cDomainConfiguration
	cDomainRemoved
	cCkMetaVersion
	cCkMetaTagsKey
	cCkMetaTagsValue
	cSidecarPath
	cSidecarSizeInBytes
	cSidecarModificationTime
	cSidecarTagsKey
	cSidecarTagsValue
	numCkCols
)

// Offsets of the deletion vector fields from cAddDV / cRemoveDV.
const (
	dvStorageType = iota
	dvPathOrInlineDv
	dvOffset
	dvSizeInBytes
	dvCardinality
	dvMaxRowIndex
)

var dvFields = []string{"storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality", "maxRowIndex"}

// ckScalarNames are the dotted leaf paths of the scalar columns.
var ckScalarNames = map[string]ckCol{
	"txn.appId": cTxnAppID, "txn.version": cTxnVersion, "txn.lastUpdated": cTxnLastUpdated,
	"add.path": cAddPath, "add.size": cAddSize, "add.modificationTime": cAddModificationTime,
	"add.dataChange": cAddDataChange, "add.stats": cAddStats, "add.baseRowId": cAddBaseRowID,
	"add.defaultRowCommitVersion": cAddDefaultRowCommitVersion, "add.clusteringProvider": cAddClusteringProvider,
	"remove.path": cRemovePath, "remove.deletionTimestamp": cRemoveDeletionTimestamp, "remove.dataChange": cRemoveDataChange,
	"remove.extendedFileMetadata": cRemoveExtendedFileMetadata, "remove.size": cRemoveSize, "remove.stats": cRemoveStats,
	"remove.baseRowId": cRemoveBaseRowID, "remove.defaultRowCommitVersion": cRemoveDefaultRowCommitVersion,
	"metaData.id": cMetaID, "metaData.name": cMetaName, "metaData.description": cMetaDescription,
	"metaData.format.provider": cMetaFormatProvider, "metaData.schemaString": cMetaSchemaString,
	"metaData.createdTime":      cMetaCreatedTime,
	"protocol.minReaderVersion": cProtoMinReader, "protocol.minWriterVersion": cProtoMinWriter,
	"domainMetadata.domain": cDomain, "domainMetadata.configuration": cDomainConfiguration, "domainMetadata.removed": cDomainRemoved,
	"checkpointMetadata.version": cCkMetaVersion,
	"sidecar.path":               cSidecarPath, "sidecar.sizeInBytes": cSidecarSizeInBytes, "sidecar.modificationTime": cSidecarModificationTime,
}

// ckMaps are the map<string,string> columns: dotted path → key column
// (the value column is key+1).
var ckMaps = map[string]ckCol{
	"add.partitionValues": cAddPVKey, "add.tags": cAddTagsKey,
	"remove.partitionValues": cRemovePVKey, "remove.tags": cRemoveTagsKey,
	"metaData.format.options": cMetaFormatOptionsKey, "metaData.configuration": cMetaConfigurationKey,
	"checkpointMetadata.tags": cCkMetaTagsKey, "sidecar.tags": cSidecarTagsKey,
}

// ckLists are the array<string> columns.
var ckLists = map[string]ckCol{
	"metaData.partitionColumns": cMetaPartitionColumns,
	"protocol.readerFeatures":   cProtoReaderFeatures, "protocol.writerFeatures": cProtoWriterFeatures,
}

// colRef locates a logical column in a file: its leaf column index (-1
// when the file lacks it) and maximum definition level.
type colRef struct{ idx, maxDef int }

// resolveCheckpointColumns maps our logical columns to the file's leaves
// by name, whatever their order, list layout (2- or 3-level) or extra
// columns (stats_parsed, partitionValues_parsed...).
func resolveCheckpointColumns(schema *parquet.Schema) []colRef {
	refs := make([]colRef, numCkCols)
	for i := range refs {
		refs[i].idx = -1
	}
	for _, path := range schema.Columns() {
		leaf, ok := schema.Lookup(path...)
		if !ok {
			continue
		}
		ref := colRef{idx: leaf.ColumnIndex, maxDef: leaf.MaxDefinitionLevel}
		joined := strings.Join(path, ".")
		if c, ok := ckScalarNames[joined]; ok {
			refs[c] = ref
			continue
		}
		if len(path) == 3 && path[1] == "deletionVector" {
			base := cAddDV
			if path[0] == "remove" {
				base = cRemoveDV
			} else if path[0] != "add" {
				continue
			}
			if i := slices.Index(dvFields, path[2]); i >= 0 {
				refs[base+ckCol(i)] = ref
			}
			continue
		}
		// Maps: <map>.key_value.key|value (any name for the repeated group).
		if len(path) >= 3 {
			if c, ok := ckMaps[strings.Join(path[:len(path)-2], ".")]; ok {
				switch path[len(path)-1] {
				case "key":
					refs[c] = ref
				case "value":
					refs[c+1] = ref
				}
				continue
			}
		}
		// Lists: 3-level <list>.list.element or legacy 2-level <list>.array.
		for _, n := range []int{2, 1} {
			if len(path) > n {
				if c, ok := ckLists[strings.Join(path[:len(path)-n], ".")]; ok {
					refs[c] = ref
					break
				}
			}
		}
	}
	return refs
}

// checkpointRow decodes one generic row.
type checkpointRow struct {
	refs []colRef
	cols [][]parquet.Value
}

func (r *checkpointRow) values(c ckCol) ([]parquet.Value, int) {
	ref := r.refs[c]
	if ref.idx < 0 || ref.idx >= len(r.cols) {
		return nil, 0
	}
	return r.cols[ref.idx], ref.maxDef
}

func (r *checkpointRow) scalar(c ckCol) (parquet.Value, bool) {
	vs, _ := r.values(c)
	if len(vs) == 0 || vs[0].IsNull() {
		return parquet.Value{}, false
	}
	return vs[0], true
}

func (r *checkpointRow) str(c ckCol) (string, bool) {
	v, ok := r.scalar(c)
	if !ok {
		return "", false
	}
	return string(v.ByteArray()), true
}

func (r *checkpointRow) strOr(c ckCol) string {
	s, _ := r.str(c)
	return s
}

func (r *checkpointRow) int64p(c ckCol) *int64 {
	v, ok := r.scalar(c)
	if !ok {
		return nil
	}
	var n int64
	switch v.Kind() {
	case parquet.Int32:
		n = int64(v.Int32())
	case parquet.Int64:
		n = v.Int64()
	default:
		return nil
	}
	return &n
}

func (r *checkpointRow) int64Or(c ckCol) int64 {
	if p := r.int64p(c); p != nil {
		return *p
	}
	return 0
}

func (r *checkpointRow) boolOr(c ckCol) bool {
	v, ok := r.scalar(c)
	return ok && v.Kind() == parquet.Boolean && v.Boolean()
}

// stringMap decodes the map whose key column is key (value column key+1);
// a null or empty map decodes as empty, a null value as nil.
func (r *checkpointRow) stringMap(key ckCol) map[string]*string {
	keys, keyDef := r.values(key)
	vals, valDef := r.values(key + 1)
	out := make(map[string]*string, len(keys))
	for j, k := range keys {
		if k.DefinitionLevel() < keyDef || k.IsNull() {
			continue
		}
		var vp *string
		if j < len(vals) && vals[j].DefinitionLevel() == valDef && !vals[j].IsNull() {
			s := string(vals[j].ByteArray())
			vp = &s
		}
		out[string(k.ByteArray())] = vp
	}
	return out
}

func (r *checkpointRow) plainMap(key ckCol) map[string]string {
	m := r.stringMap(key)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// stringList decodes a list column; null elements are skipped.
func (r *checkpointRow) stringList(c ckCol) []string {
	vs, def := r.values(c)
	var out []string
	for _, v := range vs {
		if v.DefinitionLevel() == def && !v.IsNull() {
			out = append(out, string(v.ByteArray()))
		}
	}
	return out
}

func (r *checkpointRow) deletionVector(base ckCol) *DeletionVector {
	st, ok := r.str(base + dvStorageType)
	if !ok {
		return nil
	}
	dv := &DeletionVector{
		StorageType:    st,
		PathOrInlineDv: r.strOr(base + dvPathOrInlineDv),
		SizeInBytes:    int32(r.int64Or(base + dvSizeInBytes)),
		Cardinality:    r.int64Or(base + dvCardinality),
		MaxRowIndex:    r.int64p(base + dvMaxRowIndex),
	}
	if off := r.int64p(base + dvOffset); off != nil {
		o := int32(*off)
		dv.Offset = &o
	}
	return dv
}

// actions decodes the row's actions (normally exactly one) into fn.
func (r *checkpointRow) actions(fn func(*Action)) {
	if path, ok := r.str(cAddPath); ok {
		fn(&Action{Add: &Add{
			Path:                    path,
			PartitionValues:         r.stringMap(cAddPVKey),
			Size:                    r.int64Or(cAddSize),
			ModificationTime:        r.int64Or(cAddModificationTime),
			DataChange:              r.boolOr(cAddDataChange),
			Stats:                   r.strOr(cAddStats),
			Tags:                    nilIfEmpty(r.plainMap(cAddTagsKey)),
			DeletionVector:          r.deletionVector(cAddDV),
			BaseRowID:               r.int64p(cAddBaseRowID),
			DefaultRowCommitVersion: r.int64p(cAddDefaultRowCommitVersion),
			ClusteringProvider:      r.strOr(cAddClusteringProvider),
		}})
	}
	if path, ok := r.str(cRemovePath); ok {
		rm := &Remove{
			Path:                    path,
			DeletionTimestamp:       r.int64p(cRemoveDeletionTimestamp),
			DataChange:              r.boolOr(cRemoveDataChange),
			ExtendedFileMetadata:    r.boolOr(cRemoveExtendedFileMetadata),
			Size:                    r.int64p(cRemoveSize),
			Stats:                   r.strOr(cRemoveStats),
			Tags:                    nilIfEmpty(r.plainMap(cRemoveTagsKey)),
			DeletionVector:          r.deletionVector(cRemoveDV),
			BaseRowID:               r.int64p(cRemoveBaseRowID),
			DefaultRowCommitVersion: r.int64p(cRemoveDefaultRowCommitVersion),
		}
		if pv := r.stringMap(cRemovePVKey); len(pv) > 0 || rm.ExtendedFileMetadata {
			rm.PartitionValues = pv
		}
		fn(&Action{Remove: rm})
	}
	if appID, ok := r.str(cTxnAppID); ok {
		fn(&Action{Txn: &Txn{AppID: appID, Version: r.int64Or(cTxnVersion), LastUpdated: r.int64p(cTxnLastUpdated)}})
	}
	if id, ok := r.str(cMetaID); ok {
		md := &Metadata{
			ID:               id,
			Name:             r.strOr(cMetaName),
			Description:      r.strOr(cMetaDescription),
			Format:           Format{Provider: r.strOr(cMetaFormatProvider), Options: r.plainMap(cMetaFormatOptionsKey)},
			SchemaString:     r.strOr(cMetaSchemaString),
			PartitionColumns: r.stringList(cMetaPartitionColumns),
			CreatedTime:      r.int64p(cMetaCreatedTime),
			Configuration:    r.plainMap(cMetaConfigurationKey),
		}
		if md.PartitionColumns == nil {
			md.PartitionColumns = []string{}
		}
		fn(&Action{MetaData: md})
	}
	if rv := r.int64p(cProtoMinReader); rv != nil {
		fn(&Action{Protocol: &Protocol{
			MinReaderVersion: int(*rv),
			MinWriterVersion: int(r.int64Or(cProtoMinWriter)),
			ReaderFeatures:   r.stringList(cProtoReaderFeatures),
			WriterFeatures:   r.stringList(cProtoWriterFeatures),
		}})
	}
	if domain, ok := r.str(cDomain); ok {
		fn(&Action{DomainMetadata: &DomainMetadata{
			Domain:        domain,
			Configuration: r.strOr(cDomainConfiguration),
			Removed:       r.boolOr(cDomainRemoved),
		}})
	}
	if v := r.int64p(cCkMetaVersion); v != nil {
		fn(&Action{CheckpointMetadata: &CheckpointMetadata{Version: *v, Tags: nilIfEmpty(r.plainMap(cCkMetaTagsKey))}})
	}
	if path, ok := r.str(cSidecarPath); ok {
		fn(&Action{Sidecar: &Sidecar{
			Path:             path,
			SizeInBytes:      r.int64Or(cSidecarSizeInBytes),
			ModificationTime: r.int64Or(cSidecarModificationTime),
			Tags:             nilIfEmpty(r.plainMap(cSidecarTagsKey)),
		}})
	}
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// readCheckpointFile decodes every action of one checkpoint file (or part,
// or sidecar): Parquet, or JSON lines for a UUID-named V2 checkpoint
// (PROTOCOL.md "UUID-named checkpoint").
func readCheckpointFile(ctx context.Context, store objstore.Store, info objstore.Info, fn func(*Action)) error {
	b, err := readObject(ctx, store, info.Name)
	if err != nil {
		return err
	}
	if strings.HasSuffix(info.Name, ".json") {
		err = parseActions(b, func(_ []byte, a *Action) { fn(a) })
	} else {
		err = decodeCheckpoint(b, fn)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptLog, info.Name, err)
	}
	return nil
}

// decodeCheckpoint decodes a checkpoint Parquet file held in memory. A
// panic inside the Parquet decoder (malformed input) becomes an error.
func decodeCheckpoint(b []byte, fn func(*Action)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed parquet: %v", p)
		}
	}()
	f, err := parquetfile.OpenBytes(b)
	if err != nil {
		return err
	}
	row := checkpointRow{refs: resolveCheckpointColumns(f.Schema()), cols: make([][]parquet.Value, len(f.Schema().Columns()))}
	buf := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for i := range n {
				clear(row.cols)
				buf[i].Range(func(ci int, vs []parquet.Value) bool {
					if ci < len(row.cols) {
						row.cols[ci] = vs
					}
					return true
				})
				row.actions(fn)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Checkpoint row types for writing (Spark's V1 checkpoint schema; every
// field optional).
type (
	cpRow struct {
		Txn            *cpTxn            `parquet:"txn,optional"`
		Add            *cpAdd            `parquet:"add,optional"`
		Remove         *cpRemove         `parquet:"remove,optional"`
		MetaData       *cpMetaData       `parquet:"metaData,optional"`
		Protocol       *cpProtocol       `parquet:"protocol,optional"`
		DomainMetadata *cpDomainMetadata `parquet:"domainMetadata,optional"`
	}
	cpTxn struct {
		AppID       *string `parquet:"appId,optional"`
		Version     *int64  `parquet:"version,optional"`
		LastUpdated *int64  `parquet:"lastUpdated,optional"`
	}
	cpDV struct {
		StorageType    *string `parquet:"storageType,optional"`
		PathOrInlineDv *string `parquet:"pathOrInlineDv,optional"`
		Offset         *int32  `parquet:"offset,optional"`
		SizeInBytes    *int32  `parquet:"sizeInBytes,optional"`
		Cardinality    *int64  `parquet:"cardinality,optional"`
		MaxRowIndex    *int64  `parquet:"maxRowIndex,optional"`
	}
	cpAdd struct {
		Path                    *string            `parquet:"path,optional"`
		PartitionValues         map[string]*string `parquet:"partitionValues,optional" parquet-value:",optional"`
		Size                    *int64             `parquet:"size,optional"`
		ModificationTime        *int64             `parquet:"modificationTime,optional"`
		DataChange              *bool              `parquet:"dataChange,optional"`
		Tags                    map[string]*string `parquet:"tags,optional" parquet-value:",optional"`
		DeletionVector          *cpDV              `parquet:"deletionVector,optional"`
		BaseRowID               *int64             `parquet:"baseRowId,optional"`
		DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
		Stats                   *string            `parquet:"stats,optional"`
	}
	cpRemove struct {
		Path                    *string            `parquet:"path,optional"`
		DeletionTimestamp       *int64             `parquet:"deletionTimestamp,optional"`
		DataChange              *bool              `parquet:"dataChange,optional"`
		ExtendedFileMetadata    *bool              `parquet:"extendedFileMetadata,optional"`
		PartitionValues         map[string]*string `parquet:"partitionValues,optional" parquet-value:",optional"`
		Size                    *int64             `parquet:"size,optional"`
		DeletionVector          *cpDV              `parquet:"deletionVector,optional"`
		BaseRowID               *int64             `parquet:"baseRowId,optional"`
		DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
	}
	cpFormat struct {
		Provider *string            `parquet:"provider,optional"`
		Options  map[string]*string `parquet:"options,optional" parquet-value:",optional"`
	}
	cpMetaData struct {
		ID               *string            `parquet:"id,optional"`
		Name             *string            `parquet:"name,optional"`
		Description      *string            `parquet:"description,optional"`
		Format           *cpFormat          `parquet:"format,optional"`
		SchemaString     *string            `parquet:"schemaString,optional"`
		PartitionColumns []string           `parquet:"partitionColumns,optional,list"`
		Configuration    map[string]*string `parquet:"configuration,optional" parquet-value:",optional"`
		CreatedTime      *int64             `parquet:"createdTime,optional"`
	}
	cpProtocol struct {
		MinReaderVersion *int32   `parquet:"minReaderVersion,optional"`
		MinWriterVersion *int32   `parquet:"minWriterVersion,optional"`
		ReaderFeatures   []string `parquet:"readerFeatures,optional,list"`
		WriterFeatures   []string `parquet:"writerFeatures,optional,list"`
	}
	cpDomainMetadata struct {
		Domain        *string `parquet:"domain,optional"`
		Configuration *string `parquet:"configuration,optional"`
		Removed       *bool   `parquet:"removed,optional"`
	}
)

func ptr[T any](v T) *T { return &v }

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optMap(m map[string]string) map[string]*string {
	if m == nil {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = ptr(v)
	}
	return out
}

func cpDeletionVector(dv *DeletionVector) *cpDV {
	if dv == nil {
		return nil
	}
	return &cpDV{
		StorageType: ptr(dv.StorageType), PathOrInlineDv: ptr(dv.PathOrInlineDv), Offset: dv.Offset,
		SizeInBytes: ptr(dv.SizeInBytes), Cardinality: ptr(dv.Cardinality), MaxRowIndex: dv.MaxRowIndex,
	}
}

// checkpointRows renders the snapshot as checkpoint rows: protocol,
// metaData, txns, domain metadata, live adds and the removes whose
// deletionTimestamp is after expireBeforeMs. Adds carry dataChange=false,
// as in Spark's checkpoints: a checkpoint changes no data.
func (s *Snapshot) checkpointRows(expireBeforeMs int64) (rows []cpRow, numAdds int64) {
	p, md := s.st.protocol, s.st.metadata
	rows = make([]cpRow, 0, 2+len(s.st.txns)+len(s.st.domains)+len(s.st.files)+len(s.st.tombstones))
	rows = append(rows, cpRow{Protocol: &cpProtocol{
		MinReaderVersion: ptr(int32(p.MinReaderVersion)), MinWriterVersion: ptr(int32(p.MinWriterVersion)),
		ReaderFeatures: p.ReaderFeatures, WriterFeatures: p.WriterFeatures,
	}})
	pc := md.PartitionColumns
	if pc == nil {
		pc = []string{}
	}
	conf := optMap(md.Configuration)
	if conf == nil {
		conf = map[string]*string{}
	}
	rows = append(rows, cpRow{MetaData: &cpMetaData{
		ID: ptr(md.ID), Name: optStr(md.Name), Description: optStr(md.Description),
		Format:       &cpFormat{Provider: ptr(md.Format.Provider), Options: optMap(md.Format.Options)},
		SchemaString: ptr(md.SchemaString), PartitionColumns: pc, Configuration: conf, CreatedTime: md.CreatedTime,
	}})
	for _, t := range sortedValues(s.Txns()) {
		rows = append(rows, cpRow{Txn: &cpTxn{AppID: ptr(t.AppID), Version: ptr(t.Version), LastUpdated: t.LastUpdated}})
	}
	for _, d := range sortedValues(s.st.domains) {
		rows = append(rows, cpRow{DomainMetadata: &cpDomainMetadata{Domain: ptr(d.Domain), Configuration: ptr(d.Configuration), Removed: ptr(false)}})
	}
	for _, a := range s.Files() {
		pv := a.PartitionValues
		if pv == nil {
			pv = map[string]*string{}
		}
		rows = append(rows, cpRow{Add: &cpAdd{
			Path: ptr(a.Path), PartitionValues: pv, Size: ptr(a.Size), ModificationTime: ptr(a.ModificationTime),
			DataChange: ptr(false), Tags: optMap(a.Tags), DeletionVector: cpDeletionVector(a.DeletionVector),
			BaseRowID: a.BaseRowID, DefaultRowCommitVersion: a.DefaultRowCommitVersion, Stats: optStr(a.Stats),
		}})
		numAdds++
	}
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp <= expireBeforeMs {
			continue
		}
		rows = append(rows, cpRow{Remove: &cpRemove{
			Path: ptr(r.Path), DeletionTimestamp: r.DeletionTimestamp, DataChange: ptr(r.DataChange),
			ExtendedFileMetadata: ptr(r.ExtendedFileMetadata), PartitionValues: r.PartitionValues, Size: r.Size,
			DeletionVector: cpDeletionVector(r.DeletionVector), BaseRowID: r.BaseRowID, DefaultRowCommitVersion: r.DefaultRowCommitVersion,
		}})
	}
	return rows, numAdds
}

// encodeCheckpoint writes rows as a Parquet file: DataPage V1 and PLAIN
// byte arrays for the widest reader compatibility (checklist Appendix B).
// R is a struct of optional action columns such as cpRow.
func encodeCheckpoint[R any](rows []R) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[R](&buf,
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		parquet.Compression(&snappy.Codec{}),
		parquet.CreatedBy("dsdelta", EngineVersion, ""),
	)
	const batch = 4096
	for len(rows) > 0 {
		n := min(batch, len(rows))
		if _, err := w.Write(rows[:n]); err != nil {
			return nil, fmt.Errorf("encode checkpoint: %w", err)
		}
		rows = rows[n:]
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteCheckpoint writes the classic (V1) checkpoint of the snapshot's
// version in one atomic object write, then points _last_checkpoint at it.
// Tombstones older than delta.deletedFileRetentionDuration are dropped.
// Rewriting an existing checkpoint is harmless: its content is identical
// apart from expired tombstones.
func (s *Snapshot) WriteCheckpoint(ctx context.Context) error {
	t := s.table
	retention, err := durationProp(s.st.metadata.Configuration, PropDeletedFileRetention, defaultDeletedFileRetention)
	if err != nil {
		return fmt.Errorf("checkpoint %s at version %d: %w", t.store.URL(), s.version, err)
	}
	expire := t.now().Add(-retention).UnixMilli()
	rows, numAdds := s.checkpointRows(expire)
	b, err := encodeCheckpoint(rows)
	if err != nil {
		return fmt.Errorf("checkpoint %s at version %d: %w", t.store.URL(), s.version, err)
	}
	name := checkpointName(s.version)
	if _, err := t.store.Write(ctx, name, bytes.NewReader(b), objstore.WriteOptions{ContentType: "application/vnd.apache.parquet"}); err != nil {
		return fmt.Errorf("checkpoint %s at version %d: write %s: %w", t.store.URL(), s.version, name, err)
	}
	// Never move the hint backwards: a concurrent writer may have written a
	// newer checkpoint already.
	if lc, ok := t.readLastCheckpoint(ctx); ok && lc.Version > s.version {
		return nil
	}
	lc := lastCheckpoint{Version: s.version, Size: int64(len(rows)), SizeInBytes: ptr(int64(len(b))), NumOfAddFiles: &numAdds}
	js, err := json.Marshal(lc)
	if err != nil {
		return fmt.Errorf("checkpoint %s at version %d: %w", t.store.URL(), s.version, err)
	}
	if _, err := t.store.Write(ctx, lastCheckpointName, bytes.NewReader(js), objstore.WriteOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("checkpoint %s at version %d: write %s: %w", t.store.URL(), s.version, lastCheckpointName, err)
	}
	t.opts.Logger.Debug("delta: wrote checkpoint", "table", t.store.URL(), "version", s.version,
		"actions", len(rows), "bytes", len(b))
	return nil
}
