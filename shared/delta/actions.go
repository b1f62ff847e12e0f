package delta

// Action is one line of a commit file: exactly one field is set. Unknown
// action types decode to an Action with no field set and are ignored, as
// the protocol requires of readers.
type Action struct {
	CommitInfo     *CommitInfo     `json:"commitInfo,omitempty"`
	Protocol       *Protocol       `json:"protocol,omitempty"`
	MetaData       *Metadata       `json:"metaData,omitempty"`
	Add            *Add            `json:"add,omitempty"`
	Remove         *Remove         `json:"remove,omitempty"`
	Txn            *Txn            `json:"txn,omitempty"`
	CDC            *CDC            `json:"cdc,omitempty"`
	DomainMetadata *DomainMetadata `json:"domainMetadata,omitempty"`

	// CheckpointMetadata and Sidecar appear only in V2 spec checkpoints;
	// in a commit they take no part in replay (PROTOCOL.md "Action
	// Reconciliation").
	CheckpointMetadata *CheckpointMetadata `json:"checkpointMetadata,omitempty"`
	Sidecar            *Sidecar            `json:"sidecar,omitempty"`
}

// Protocol is the protocol action.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
	Configuration    map[string]string `json:"configuration"`
}

// DeletionVector is a deletion vector descriptor.
type DeletionVector struct {
	StorageType    string `json:"storageType"` // "u", "p" or "i"
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
	MaxRowIndex    *int64 `json:"maxRowIndex,omitempty"`
}

// Add is the add action. Path is as stored in the log: URI-encoded and
// relative to the table root (or an absolute URI).
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
	ClusteringProvider      string             `json:"clusteringProvider,omitempty"`
}

// Remove is the remove action.
type Remove struct {
	Path                    string             `json:"path"`
	DeletionTimestamp       *int64             `json:"deletionTimestamp,omitempty"`
	DataChange              bool               `json:"dataChange"`
	ExtendedFileMetadata    bool               `json:"extendedFileMetadata,omitempty"`
	PartitionValues         map[string]*string `json:"partitionValues,omitempty"` // commit encoding writes {} when extendedFileMetadata
	Size                    *int64             `json:"size,omitempty"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// Txn is the application transaction action used for exactly-once writes.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CDC is the cdc (change data file) action; read and ignored for snapshots.
type CDC struct {
	Path            string             `json:"path"`
	PartitionValues map[string]*string `json:"partitionValues"`
	Size            int64              `json:"size"`
	DataChange      bool               `json:"dataChange"`
	Tags            map[string]string  `json:"tags,omitempty"`
}

// DomainMetadata is the domainMetadata action.
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// CommitInfo is free-form provenance; the fields we read and write are
// typed, and other engines' extra fields are ignored on read.
type CommitInfo struct {
	Timestamp           int64          `json:"timestamp"`
	Operation           string         `json:"operation,omitempty"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
	ReadVersion         *int64         `json:"readVersion,omitempty"`
	IsolationLevel      string         `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend,omitempty"`
	EngineInfo          string         `json:"engineInfo,omitempty"`
	TxnID               string         `json:"txnId,omitempty"`
}

// CheckpointMetadata is the checkpointMetadata action: exactly one in every
// V2 spec checkpoint (PROTOCOL.md "Checkpoint Metadata").
type CheckpointMetadata struct {
	Version int64             `json:"version"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// Sidecar is the sidecar action: a Parquet file of a V2 spec checkpoint's
// add and remove actions in _delta_log/_sidecars (PROTOCOL.md "Sidecar
// File Information"). Path is URI-encoded, normally just the file name.
type Sidecar struct {
	Path             string            `json:"path"`
	SizeInBytes      int64             `json:"sizeInBytes"`
	ModificationTime int64             `json:"modificationTime"`
	Tags             map[string]string `json:"tags,omitempty"`
}
