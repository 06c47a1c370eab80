package session

// Tests of the dedup index behind prompt and steer idempotency: bounded (oldest evicted past
// Limit, contract §6) and plain data across continue-as-new.

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDedup_NewIndexIsEmptyWithDocumentedLimit(t *testing.T) {
	d := NewDedupIndex[int]()
	require.Equal(t, 4096, DedupLimit, "contract §6: oldest evicted past 4096 ids")
	require.Equal(t, DedupLimit, d.Limit)
	require.NotNil(t, d.Entries)
	require.Empty(t, d.Entries)
	_, ok := d.Get("x")
	require.False(t, ok)
}

func TestDedup_GetReturnsWhatPutRemembered(t *testing.T) {
	d := NewDedupIndex[string]()
	d.Put("a", "1")
	d.Put("b", "2")
	for id, want := range map[string]string{"a": "1", "b": "2"} {
		got, ok := d.Get(id)
		require.True(t, ok, id)
		require.Equal(t, want, got)
	}
	got, ok := d.Get("c")
	require.False(t, ok)
	require.Empty(t, got, "a miss returns the zero value")
}

func TestDedup_EvictsOldestPastLimit(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		puts      int
		wantOrder []string
	}{
		{"under the limit", 3, 2, []string{"id0", "id1"}},
		{"at the limit", 3, 3, []string{"id0", "id1", "id2"}},
		{"one past the limit evicts the oldest", 3, 4, []string{"id1", "id2", "id3"}},
		{"far past the limit keeps the newest", 3, 10, []string{"id7", "id8", "id9"}},
		{"limit one", 1, 5, []string{"id4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDedupIndex[int]()
			d.Limit = tt.limit
			for i := range tt.puts {
				d.Put("id"+strconv.Itoa(i), i)
				require.LessOrEqual(t, len(d.Entries), tt.limit)
				require.Len(t, d.Order, len(d.Entries))
			}
			require.Equal(t, tt.wantOrder, d.Order)
			for i := range tt.puts {
				id := "id" + strconv.Itoa(i)
				v, ok := d.Get(id)
				kept := false
				for _, o := range tt.wantOrder {
					kept = kept || o == id
				}
				require.Equal(t, kept, ok, id)
				if ok {
					require.Equal(t, i, v)
				}
			}
		})
	}
}

func TestDedup_PutExistingIDUpdatesValueKeepsPlace(t *testing.T) {
	d := NewDedupIndex[int]()
	d.Limit = 2
	d.Put("a", 1)
	d.Put("b", 2)
	d.Put("a", 10) // not new: stays the oldest
	require.Equal(t, []string{"a", "b"}, d.Order)
	v, _ := d.Get("a")
	require.Equal(t, 10, v)
	d.Put("c", 3)
	_, ok := d.Get("a")
	require.False(t, ok, "a was still the oldest id")
	require.Equal(t, []string{"b", "c"}, d.Order)
}

func TestDedup_ZeroValueUsesDefaultLimit(t *testing.T) {
	var d DedupIndex[int]
	_, ok := d.Get("x")
	require.False(t, ok)
	for i := range DedupLimit + 1 {
		d.Put(strconv.Itoa(i), i)
	}
	require.Len(t, d.Entries, DedupLimit)
	_, ok = d.Get("0")
	require.False(t, ok)
	_, ok = d.Get(strconv.Itoa(DedupLimit))
	require.True(t, ok)
}

func TestDedup_JSONRoundTrip(t *testing.T) {
	type val struct {
		N int    `json:"n"`
		S string `json:"s"`
	}
	d := NewDedupIndex[val]()
	d.Limit = 3
	for i := range 5 {
		d.Put("id"+strconv.Itoa(i), val{N: i, S: "v" + strconv.Itoa(i)})
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var next DedupIndex[val]
	require.NoError(t, json.Unmarshal(b, &next))
	require.True(t, reflect.DeepEqual(d, next), "round trip changed the index:\nbefore %+v\nafter  %+v", d, next)

	// The carried index keeps its eviction order and limit.
	next.Put("id5", val{N: 5})
	require.Equal(t, []string{"id3", "id4", "id5"}, next.Order)
	_, ok := next.Get("id2")
	require.False(t, ok)
}

// FuzzDedupIndex puts an arbitrary sequence of ids (from a small alphabet, so ids repeat)
// into an index of arbitrary limit, the zero limit included: entries and eviction order
// always agree, the index holds at most its limit, the newest ids are kept with their latest
// value, and it survives a JSON round trip (continue-as-new) unchanged.
func FuzzDedupIndex(f *testing.F) {
	f.Add(uint8(3), []byte("abcabcdefa"))
	f.Add(uint8(0), []byte("aaaa"))
	f.Add(uint8(1), []byte("abababab"))
	f.Fuzz(func(t *testing.T, limit uint8, ids []byte) {
		d := DedupIndex[int]{Entries: map[string]int{}, Limit: int(limit % 16)}
		effective := d.Limit
		if effective <= 0 {
			effective = DedupLimit
		}
		latest := map[string]int{}
		var order []string // distinct ids, oldest first by first insertion
		for i, b := range ids {
			id := string(rune('a' + b%26))
			d.Put(id, i)
			if _, ok := latest[id]; !ok {
				order = append(order, id)
			}
			latest[id] = i
			if len(order) > effective {
				for _, old := range order[:len(order)-effective] {
					delete(latest, old)
				}
				order = order[len(order)-effective:]
			}
			if len(d.Entries) != len(d.Order) || len(d.Order) > effective {
				t.Fatalf("%d entries, order %v, limit %d", len(d.Entries), d.Order, effective)
			}
			if !reflect.DeepEqual(d.Order, order) {
				t.Fatalf("order %v, want %v", d.Order, order)
			}
			for id, v := range latest {
				if got, ok := d.Get(id); !ok || got != v {
					t.Fatalf("Get(%q) = %d %v, want %d", id, got, ok, v)
				}
			}
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back DedupIndex[int]
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if len(d.Order) > 0 && !reflect.DeepEqual(d, back) {
			t.Fatalf("round trip: %+v, was %+v", back, d)
		}
	})
}
