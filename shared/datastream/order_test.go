package datastream

import (
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func mustOrder(t *testing.T, src Source, rm ReadMethod, pos Position, ct string, ts value.Micros) OrderKey {
	t.Helper()
	k, err := BuildOrder(src, rm, pos, ct, ts)
	if err != nil {
		t.Fatalf("BuildOrder(%s, %v): %v", src, pos, err)
	}
	return k
}

func TestOrderKeysSortNumericallyNotAsText(t *testing.T) {
	const ts = value.Micros(1_700_000_000_000_000)
	tests := []struct {
		name          string
		src           Source
		before, after Position
	}{
		{"binlog mysql-bin.999999 sorts before mysql-bin.1000000", MySQL,
			Position{LogFile: "mysql-bin.999999", LogPosition: 900}, Position{LogFile: "mysql-bin.1000000", LogPosition: 4}},
		{"a higher binlog position in the same file sorts later", MySQL,
			Position{LogFile: "mysql-bin.000014", LogPosition: 60050}, Position{LogFile: "mysql-bin.000014", LogPosition: 60409}},
		{"LSN F/FFFFFFFF sorts before 10/0", PostgreSQL,
			Position{LSN: "F/FFFFFFFF"}, Position{LSN: "10/0"}},
		{"LSN 16/CB002DB0 sorts before 16/CB002DB1", PostgreSQL,
			Position{LSN: "16/CB002DB0"}, Position{LSN: "16/CB002DB1"}},
		{"Oracle rs_id with spaces compares its parts as numbers", Oracle,
			Position{SCN: 382470, RSID: " 0x000004.00000705.000f "}, Position{SCN: 382470, RSID: " 0x000004.00000705.0010 "}},
		{"Oracle scn decides before rs_id", Oracle,
			Position{SCN: 9, RSID: " 0x000009.00000000.0000 "}, Position{SCN: 10, RSID: " 0x000001.00000000.0000 "}},
		{"Oracle ssn decides after rs_id", Oracle,
			Position{SCN: 10, RSID: "0x000001.00000002.0003", SSN: 2}, Position{SCN: 10, RSID: "0x000001.00000002.0003", SSN: 10}},
		{"SQL Server LSN parts compare as hex numbers", SQLServer,
			Position{LSN: "00000025:00000728:000f"}, Position{LSN: "00000025:00000728:0010"}},
		{"SQL Server VLF decides before block", SQLServer,
			Position{LSN: "00000025:ffffffff:0003"}, Position{LSN: "00000026:00000001:0001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The later event has the earlier timestamp: position must win.
			a := mustOrder(t, tt.src, CDC, tt.before, ChangeUpdateInsert, ts+5)
			b := mustOrder(t, tt.src, CDC, tt.after, ChangeUpdateInsert, ts)
			if a.Compare(b) >= 0 {
				t.Errorf("%s (%x) does not sort before %s (%x)", a.Text, a.Bytes, b.Text, b.Bytes)
			}
		})
	}
}

func TestOrderKeyRules(t *testing.T) {
	const ts = value.Micros(1_700_000_000_000_000)
	mysqlPos := Position{LogFile: "mysql-bin.000131", LogPosition: 5700}
	tests := []struct {
		name          string
		before, after func(t *testing.T) OrderKey
	}{
		{"backfill sorts before every CDC event even with a later timestamp",
			func(t *testing.T) OrderKey { return mustOrder(t, MySQL, Backfill, Position{}, ChangeInsert, ts+1e12) },
			func(t *testing.T) OrderKey {
				return mustOrder(t, MySQL, CDC, Position{LogFile: "mysql-bin.000001", LogPosition: 4}, ChangeInsert, ts)
			}},
		{"backfill rows order among themselves by timestamp",
			func(t *testing.T) OrderKey { return mustOrder(t, PostgreSQL, Backfill, Position{}, ChangeInsert, ts) },
			func(t *testing.T) OrderKey { return mustOrder(t, PostgreSQL, Backfill, Position{}, ChangeInsert, ts+1) }},
		{"at an equal position UPDATE-DELETE sorts before UPDATE-INSERT even with a later timestamp",
			func(t *testing.T) OrderKey { return mustOrder(t, MySQL, CDC, mysqlPos, ChangeUpdateDelete, ts+1e6) },
			func(t *testing.T) OrderKey { return mustOrder(t, MySQL, CDC, mysqlPos, ChangeUpdateInsert, ts) }},
		{"at an equal position and change type the timestamp breaks the tie",
			func(t *testing.T) OrderKey { return mustOrder(t, MySQL, CDC, mysqlPos, ChangeUpdateInsert, ts) },
			func(t *testing.T) OrderKey { return mustOrder(t, MySQL, CDC, mysqlPos, ChangeUpdateInsert, ts+1) }},
		{"an unknown source orders by timestamp only",
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeInsert, ts) },
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeInsert, ts+1) }},
		{"an unknown source at an equal timestamp applies UPDATE-DELETE first",
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeUpdateDelete, ts) },
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeUpdateInsert, ts) }},
		{"a timestamp before 1970 sorts before one after",
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeInsert, -5) },
			func(t *testing.T) OrderKey { return mustOrder(t, Unknown, CDC, Position{}, ChangeInsert, 5) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.before(t), tt.after(t)
			if a.Compare(b) >= 0 {
				t.Errorf("%q %x does not sort before %q %x", a.Text, a.Bytes, b.Text, b.Bytes)
			}
		})
	}
}

func TestOrderKeyReadableForms(t *testing.T) {
	tests := []struct {
		name string
		src  Source
		rm   ReadMethod
		pos  Position
		want string
	}{
		{"MySQL shows file and position", MySQL, CDC, Position{LogFile: "mysql-bin.000123", LogPosition: 4567}, "mysql-bin.000123:4567"},
		{"PostgreSQL shows the LSN in canonical hex", PostgreSQL, CDC, Position{LSN: "16/cb002db0"}, "16/CB002DB0"},
		{"Oracle shows scn, trimmed rs_id and ssn", Oracle, CDC, Position{SCN: 382470, RSID: " 0x000004.00000705.0010 ", SSN: 0}, "382470:0x000004.00000705.0010:0"},
		{"SQL Server shows the LSN", SQLServer, CDC, Position{LSN: "00000025:00000728:0003"}, "00000025:00000728:0003"},
		{"backfill says backfill", MySQL, Backfill, Position{}, "backfill"},
		{"an unknown source shows the timestamp", Unknown, CDC, Position{}, "1970-01-01T00:00:01.000000Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := mustOrder(t, tt.src, tt.rm, tt.pos, ChangeInsert, 1_000_000)
			if k.Text != tt.want {
				t.Errorf("Text = %q, want %q", k.Text, tt.want)
			}
		})
	}
}

func TestOrderKeyRejectsMalformedPositions(t *testing.T) {
	tests := []struct {
		name  string
		src   Source
		pos   Position
		field string
	}{
		{"a binlog file without a numeric suffix", MySQL, Position{LogFile: "mysql-bin.abc"}, "log_file"},
		{"an LSN without a slash", PostgreSQL, Position{LSN: "16CB002DB0"}, "lsn"},
		{"an LSN half beyond 32 bits", PostgreSQL, Position{LSN: "1/100000000"}, "lsn"},
		{"an rs_id with two parts", Oracle, Position{RSID: "0x0004.0705"}, "rs_id"},
		{"an rs_id with a non-hex part", Oracle, Position{RSID: "0x0004.07z5.0001"}, "rs_id"},
		{"a SQL Server LSN with two parts", SQLServer, Position{LSN: "00000025:00000728"}, "lsn"},
		{"a negative binlog position", MySQL, Position{LogFile: "mysql-bin.000001", LogPosition: -1}, "log_position"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildOrder(tt.src, CDC, tt.pos, ChangeInsert, 0)
			pe, ok := err.(*positionError)
			if !ok {
				t.Fatalf("err = %v, want a positionError", err)
			}
			if pe.field != tt.field {
				t.Errorf("field = %q, want %q", pe.field, tt.field)
			}
		})
	}
}

func TestIsDelete(t *testing.T) {
	tests := []struct {
		name       string
		isDeleted  bool
		changeType string
		want       bool
	}{
		{"is_deleted alone deletes", true, "", true},
		{"DELETE deletes", false, "DELETE", true},
		{"UPDATE-DELETE with is_deleted false (Oracle PK change) deletes", false, "UPDATE-DELETE", true},
		{"lower-case update-delete deletes", false, "update-delete", true},
		{"INSERT upserts", false, "INSERT", false},
		{"UPDATE-INSERT upserts", false, "UPDATE-INSERT", false},
		{"no change type upserts", false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsDelete(tt.isDeleted, tt.changeType); got != tt.want {
				t.Errorf("IsDelete(%v, %q) = %v, want %v", tt.isDeleted, tt.changeType, got, tt.want)
			}
		})
	}
}

func TestReadMethodClassification(t *testing.T) {
	for in, want := range map[string]ReadMethod{
		"mysql-backfill-fulldump":    Backfill,
		"mysql-backfill-incremental": Backfill,
		"postgresql-backfill":        Backfill,
		"oracle_dump":                Backfill,
		"mysql-cdc-binlog":           CDC,
		"postgresql-cdc":             CDC,
		"oracle-supplementation":     CDC,
		"":                           CDC,
	} {
		t.Run(in+" is "+want.String(), func(t *testing.T) {
			if got := readMethodOf(in); got != want {
				t.Errorf("readMethodOf(%q) = %v", in, got)
			}
		})
	}
}
