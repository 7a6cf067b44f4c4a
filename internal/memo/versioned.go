package memo

// Versioned keeps one value per key with the version it was built for (for example a
// store's client, built for the store's generation and its credentials' version): Get
// returns the kept value while the version is the same, and builds a new one when it
// changed.
type Versioned[K comparable, V any] struct {
	m Map[K, versioned[V]]
}

type versioned[V any] struct {
	version string
	value   V
}

// Get returns k's value for version, calling build when there is none for that version.
// A build that fails keeps what was there and returns its error. build runs under the
// lock, so concurrent callers of one version build once; it must not call Get.
func (c *Versioned[K, V]) Get(k K, version string, build func() (V, error)) (V, error) {
	var err error
	e := c.m.Update(k, func(e versioned[V], ok bool) (versioned[V], bool) {
		if ok && e.version == version {
			return e, true
		}
		v, buildErr := build()
		if buildErr != nil {
			err = buildErr
			return e, ok
		}
		return versioned[V]{version: version, value: v}, true
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return e.value, nil
}

// Forget drops k's value.
func (c *Versioned[K, V]) Forget(k K) { c.m.Delete(k) }

// Current returns k's value, whichever version it was built for.
func (c *Versioned[K, V]) Current(k K) (V, bool) {
	e, ok := c.m.Get(k)
	return e.value, ok
}
