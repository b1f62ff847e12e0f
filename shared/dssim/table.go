package dssim

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
)

// column is one simulated source column.
type column struct {
	name string
	typ  value.Type
	gen  func(r *rand.Rand, id int64) any // a random value for a row
}

// tableSim plays one table's workload.
type tableSim struct {
	spec    TableSpec
	rng     *rand.Rand
	cols    []column
	key     []int // column indexes of the primary key
	start   time.Time
	clock   time.Time
	pos     position
	state   map[string][]any
	order   []string // insertion order of keys in state, for deterministic picks
	nextID  int64
	deletes int
}

func newTableSim(spec TableSpec, rng *rand.Rand, start time.Time) (*tableSim, error) {
	ts := &tableSim{spec: spec, rng: rng, start: start, clock: start, state: map[string][]any{}, nextID: 1}
	switch spec.Source {
	case MySQL:
		ts.cols = []column{
			{"id", value.Long, nil},
			{"email", value.String, func(r *rand.Rand, id int64) any { return fmt.Sprintf("user%d+%d@example.com", id, r.IntN(1000)) }},
			{"name", value.String, func(r *rand.Rand, id int64) any { return pick(r, firstNames) + " " + pick(r, lastNames) }},
			{"balance", value.DecimalType{Precision: 12, Scale: 2}, func(r *rand.Rand, _ int64) any { return dec(r.Int64N(2_000_000_00)-50_000_00, 2) }},
			{"created_at", value.Timestamp, func(r *rand.Rand, _ int64) any {
				return value.Micros(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + r.Int64N(700*86400*1_000_000))
			}},
			{"is_active", value.Integer, func(r *rand.Rand, _ int64) any { return int32(r.IntN(2)) }},
			{"notes", value.String, func(r *rand.Rand, _ int64) any {
				if r.IntN(3) == 0 {
					return nil
				}
				return pick(r, notes)
			}},
		}
		ts.key = []int{0}
		// Start near the 6-to-7-digit binlog index boundary half the time.
		if rng.IntN(2) == 0 {
			ts.pos.binlogFile = "mysql-bin.999999"
		} else {
			ts.pos.binlogFile = "mysql-bin.000017"
		}
		ts.pos.binlogPos = 4
	case Oracle:
		ts.cols = []column{
			{"EMPLOYEE_ID", value.Long, nil},
			{"FIRST_NAME", value.String, func(r *rand.Rand, _ int64) any { return pick(r, firstNames) }},
			{"LAST_NAME", value.String, func(r *rand.Rand, _ int64) any { return pick(r, lastNames) }},
			{"SALARY", value.DecimalType{Precision: 8, Scale: 2}, func(r *rand.Rand, _ int64) any { return dec(r.Int64N(99_999_99), 2) }},
			{"HIRE_DATE", value.Timestamp, func(r *rand.Rand, _ int64) any {
				return value.Micros(time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).Unix()*1_000_000 + r.Int64N(5000)*86400*1_000_000)
			}},
		}
		ts.key = []int{0}
		ts.pos.scn = 382470 + rng.Int64N(1000)
	case PostgreSQL:
		ts.cols = []column{
			{"order_id", value.Long, nil},
			{"line_no", value.Integer, nil},
			{"customer", value.String, func(r *rand.Rand, _ int64) any { return pick(r, firstNames) + " " + pick(r, lastNames) }},
			{"total", value.DecimalType{Precision: 14, Scale: 4}, func(r *rand.Rand, _ int64) any { return dec(r.Int64N(1_000_000_0000), 4) }},
			{"qty", value.Integer, func(r *rand.Rand, _ int64) any { return int32(r.IntN(50) + 1) }},
			{"created_at", value.Timestamp, func(r *rand.Rand, _ int64) any {
				return value.Micros(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + r.Int64N(200*86400*1_000_000))
			}},
			{"shipped", value.Boolean, func(r *rand.Rand, _ int64) any { return r.IntN(2) == 0 }},
		}
		ts.key = []int{0, 1}
		// Cross the 32-bit boundary of the LSN's low word: F/FFFFxxxx < 10/0.
		ts.pos.lsn = "F/FFFF0000"
	default:
		return nil, fmt.Errorf("simulate %s: unknown source %q", spec.ID(), spec.Source)
	}
	return ts, nil
}

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func dec(unscaled int64, scale int) value.Decimal {
	return value.Decimal{Unscaled: big.NewInt(unscaled), Scale: scale}
}

var (
	firstNames = []string{"Ada", "Grace", "Linus", "Barbara", "Edsger", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Zoë", "José"}
	lastNames  = []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Allen", "Thompson", "Hamilton", "Ritchie", "Perlman", "Ñúñez", "O'Brien"}
	notes      = []string{"vip", "call back", "línea 2", "multi\nline", `quote "x"`, "🙂 emoji"}
)

func (ts *tableSim) schema() value.StructType {
	st := value.StructType{}
	for _, c := range ts.cols {
		st.Fields = append(st.Fields, value.Field{Name: c.name, Type: c.typ, Nullable: true})
	}
	return st
}

func (ts *tableSim) keyNames() []string {
	out := make([]string, len(ts.key))
	for i, k := range ts.key {
		out[i] = ts.cols[k].name
	}
	return out
}

func (ts *tableSim) keyOf(row []any) string {
	k := make([]any, len(ts.key))
	for i, c := range ts.key {
		k[i] = row[c]
	}
	return KeyString(k)
}

// newRow makes a fresh row with a new, never used key.
func (ts *tableSim) newRow() []any {
	id := ts.nextID
	ts.nextID++
	row := make([]any, len(ts.cols))
	for i, c := range ts.cols {
		switch {
		case i == 0:
			row[i] = id
		case c.gen == nil: // PostgreSQL line_no
			row[i] = int32(1 + ts.rng.IntN(3))
		default:
			row[i] = c.gen(ts.rng, id)
		}
	}
	return row
}

// mutate returns a copy of row with some non-key columns changed.
func (ts *tableSim) mutate(row []any) []any {
	out := append([]any(nil), row...)
	changed := false
	for i, c := range ts.cols {
		if c.gen == nil || (changed && ts.rng.IntN(2) == 0) {
			continue
		}
		out[i] = c.gen(ts.rng, row[0].(int64))
		changed = true
	}
	return out
}

func (ts *tableSim) put(row []any) {
	k := ts.keyOf(row)
	if _, ok := ts.state[k]; !ok {
		ts.order = append(ts.order, k)
	}
	ts.state[k] = row
}

func (ts *tableSim) del(row []any) {
	k := ts.keyOf(row)
	delete(ts.state, k)
	for i, o := range ts.order {
		if o == k {
			ts.order = append(ts.order[:i], ts.order[i+1:]...)
			break
		}
	}
}

// randomLive picks an existing row.
func (ts *tableSim) randomLive() []any {
	return ts.state[ts.order[ts.rng.IntN(len(ts.order))]]
}

// tick advances the clock and the log position for one source transaction.
func (ts *tableSim) tick() {
	ts.clock = ts.clock.Add(time.Duration(ts.rng.IntN(700)) * time.Millisecond)
	switch ts.spec.Source {
	case MySQL:
		ts.pos.binlogPos += 100 + ts.rng.Int64N(400)
		if ts.rng.IntN(25) == 0 { // binlog rotation
			var n int64
			fmt.Sscanf(ts.pos.binlogFile, "mysql-bin.%d", &n)
			ts.pos.binlogFile = fmt.Sprintf("mysql-bin.%06d", n+1)
			ts.pos.binlogPos = 4
		}
	case Oracle:
		ts.pos.scn += 1 + ts.rng.Int64N(30)
		ts.pos.ssn = 0
		ts.pos.rsID = fmt.Sprintf(" 0x%06x.%08x.%04x ", 4, ts.pos.scn*3, ts.rng.IntN(0x20))
		ts.pos.txID++
	case PostgreSQL:
		var hi, lo uint64
		fmt.Sscanf(ts.pos.lsn, "%X/%X", &hi, &lo)
		v := hi<<32 | lo
		v += 0x28 + uint64(ts.rng.IntN(0x2000))
		ts.pos.lsn = fmt.Sprintf("%X/%X", v>>32, v&0xffffffff)
		ts.pos.txID = 1186572 + int64(ts.rng.IntN(1000))
	}
}

// sourceTime is the source_timestamp Datastream reports: whole seconds for
// MySQL and Oracle, milliseconds for PostgreSQL.
func (ts *tableSim) sourceTime() time.Time {
	if ts.spec.Source == PostgreSQL {
		return ts.clock.Truncate(time.Millisecond)
	}
	return ts.clock.Truncate(time.Second)
}

func (ts *tableSim) cdcMethod() string {
	switch ts.spec.Source {
	case MySQL:
		return "mysql-cdc-binlog"
	case Oracle:
		return "oracle-cdc-logminer"
	}
	return "postgresql-cdc"
}

func (ts *tableSim) backfillMethod() string {
	switch ts.spec.Source {
	case MySQL:
		return "mysql-backfill-fulldump"
	case Oracle:
		return "oracle-backfill"
	}
	return "postgresql-backfill"
}

// play runs the workload and returns every event in emission order.
func (ts *tableSim) play() []event {
	for range ts.spec.InitialRows {
		ts.put(ts.newRow())
	}
	var events []event
	emit := func(e event) {
		e.table = ts
		e.seq = len(events)
		if e.readTS.IsZero() {
			e.readTS = ts.clock.Add(time.Duration(1+ts.rng.IntN(5000)) * time.Millisecond)
		}
		events = append(events, e)
	}
	// The backfill reads the table while CDC is already running: it starts
	// after about a third of the changes, so backfill and CDC overlap.
	backfillAt := ts.spec.Changes / 3
	backfill := func() {
		ts.clock = ts.clock.Add(time.Second)
		for _, k := range ts.order {
			ct := "INSERT"
			if ts.spec.Source == Oracle && ts.rng.IntN(2) == 0 {
				ct = "" // seen as null in older Oracle backfill files
			}
			emit(event{readMethod: ts.backfillMethod(), changeType: ct, sourceTS: ts.clock.Truncate(time.Millisecond), readTS: ts.clock, row: ts.state[k]})
		}
	}
	for i := range ts.spec.Changes {
		if i == backfillAt {
			backfill()
		}
		ts.tick()
		cdc := ts.cdcMethod()
		update := "UPDATE"
		if ts.spec.Source == MySQL {
			update = "UPDATE-INSERT" // MySQL reports every update this way
		}
		op := ts.rng.IntN(100)
		switch {
		case len(ts.order) == 0 || op < 35:
			row := ts.newRow()
			ts.put(row)
			emit(event{readMethod: cdc, changeType: "INSERT", sourceTS: ts.sourceTime(), pos: ts.pos, row: row})
		case op < 75:
			row := ts.mutate(ts.randomLive())
			ts.put(row)
			emit(event{readMethod: cdc, changeType: update, sourceTS: ts.sourceTime(), pos: ts.pos, row: row})
			if ts.spec.Source == Oracle && ts.rng.IntN(3) == 0 {
				// A second statement of the same transaction: same scn and
				// rs_id, next ssn, same second.
				ts.pos.ssn++
				row = ts.mutate(row)
				ts.put(row)
				emit(event{readMethod: cdc, changeType: update, sourceTS: ts.sourceTime(), pos: ts.pos, row: row})
			}
		case op < 90:
			old := ts.randomLive()
			ts.del(old)
			ts.deletes++
			emit(event{readMethod: cdc, changeType: "DELETE", isDeleted: true, sourceTS: ts.sourceTime(), pos: ts.pos, row: old})
		default:
			// Primary-key change: MySQL and Oracle emit UPDATE-DELETE (old
			// row) and UPDATE-INSERT (new row) at the same position; MySQL
			// flags the old half is_deleted=true, Oracle leaves it false.
			// PostgreSQL is modelled as a DELETE then an INSERT.
			old := ts.randomLive()
			nw := ts.mutate(old)
			nw[0] = ts.nextID
			ts.nextID++
			ts.del(old)
			ts.put(nw)
			ts.deletes++
			if ts.spec.Source == PostgreSQL {
				emit(event{readMethod: cdc, changeType: "DELETE", isDeleted: true, sourceTS: ts.sourceTime(), pos: ts.pos, row: old})
				ts.tick()
				emit(event{readMethod: cdc, changeType: "INSERT", sourceTS: ts.sourceTime(), pos: ts.pos, row: nw})
			} else {
				emit(event{readMethod: cdc, changeType: "UPDATE-DELETE", isDeleted: ts.spec.Source == MySQL, sourceTS: ts.sourceTime(), pos: ts.pos, row: old})
				emit(event{readMethod: cdc, changeType: "UPDATE-INSERT", sourceTS: ts.sourceTime(), pos: ts.pos, row: nw})
			}
		}
	}
	if ts.spec.Changes == 0 || backfillAt >= ts.spec.Changes {
		backfill()
	}
	return events
}

func (ts *tableSim) reference(events int) *Table {
	rows := make(map[string][]any, len(ts.state))
	for k, r := range ts.state {
		rows[k] = r
	}
	return &Table{Spec: ts.spec, Schema: ts.schema(), Key: ts.keyNames(), Rows: rows, Events: events, Deletes: ts.deletes}
}
