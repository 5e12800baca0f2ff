package kernel

// SetCompiler replaces NVRTC and the version string for a test, and returns the
// function that restores them.
func SetCompiler(f func(src, name, arch string) ([]byte, error), vers string) (restore func()) {
	c, v := compile, versions
	compile, versions = f, func() string { return vers }
	return func() { compile, versions = c, v }
}

// Lookup is Cache.lookup: the image of src for arch.
func (c *Cache) Lookup(src, name, arch string) ([]byte, error) { return c.lookup(src, name, arch) }
