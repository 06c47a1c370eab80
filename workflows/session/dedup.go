package session

// DedupLimit is how many client ids a dedup index remembers before it evicts the oldest.
const DedupLimit = 4096

// DedupIndex remembers a value per client id, evicting the oldest id past Limit. It is
// plain data so it travels across continue-as-new; lookups never iterate the map.
type DedupIndex[V any] struct {
	Entries map[string]V `json:"entries"`
	Order   []string     `json:"order"`
	Limit   int          `json:"limit"`
}

// NewDedupIndex returns an empty index of DedupLimit ids.
func NewDedupIndex[V any]() DedupIndex[V] {
	return DedupIndex[V]{Entries: map[string]V{}, Limit: DedupLimit}
}

// Get returns the value remembered for id.
func (d *DedupIndex[V]) Get(id string) (V, bool) {
	v, ok := d.Entries[id]
	return v, ok
}

// Put remembers v for id (a new id goes to the back of the eviction order).
func (d *DedupIndex[V]) Put(id string, v V) {
	if d.Entries == nil {
		d.Entries = map[string]V{}
	}
	if _, ok := d.Entries[id]; !ok {
		d.Order = append(d.Order, id)
	}
	d.Entries[id] = v
	limit := d.Limit
	if limit <= 0 {
		limit = DedupLimit
	}
	if over := len(d.Order) - limit; over > 0 {
		for _, old := range d.Order[:over] {
			delete(d.Entries, old)
		}
		d.Order = append([]string(nil), d.Order[over:]...)
	}
}
