package golda

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/gen/internal/golden/goldentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bit fields of goldDesc are checked against gcc: a C program makes each assignment
// on a goldDesc filled with a byte pattern and prints the struct's bytes and the value C
// reads back; the Go setters must produce the same bytes from the same pattern, and the
// Go getters must read the same value from C's bytes.

type bitField struct {
	name   string
	ctype  string // the declared type, for the C cast
	width  int
	signed bool
	set    func(*GoldDesc, int64)
	get    func(*GoldDesc) int64
}

var bitFields = []bitField{
	{"ready", "unsigned int", 1, false, func(d *GoldDesc, v int64) { d.SetReady(uint32(v)) }, func(d *GoldDesc) int64 { return int64(d.Ready()) }},
	{"flags", "unsigned int", 3, false, func(d *GoldDesc, v int64) { d.SetFlags(uint32(v)) }, func(d *GoldDesc) int64 { return int64(d.Flags()) }},
	{"level", "int", 5, true, func(d *GoldDesc, v int64) { d.SetLevel(int32(v)) }, func(d *GoldDesc) int64 { return int64(d.Level()) }},
	{"wide", "unsigned int", 25, false, func(d *GoldDesc, v int64) { d.SetWide(uint32(v)) }, func(d *GoldDesc) int64 { return int64(d.Wide()) }},
	{"delta", "int", 7, true, func(d *GoldDesc, v int64) { d.SetDelta(int32(v)) }, func(d *GoldDesc) int64 { return int64(d.Delta()) }},
	{"lo", "unsigned long long", 12, false, func(d *GoldDesc, v int64) { d.SetLo(uint64(v)) }, func(d *GoldDesc) int64 { return int64(d.Lo()) }},
	{"big", "unsigned long long", 40, false, func(d *GoldDesc, v int64) { d.SetBig(uint64(v)) }, func(d *GoldDesc) int64 { return int64(d.Big()) }},
	{"tail", "unsigned char", 4, false, func(d *GoldDesc, v int64) { d.SetTail(uint8(v)) }, func(d *GoldDesc) int64 { return int64(d.Tail()) }},
	{"last", "unsigned short", 3, false, func(d *GoldDesc, v int64) { d.SetLast(uint16(v)) }, func(d *GoldDesc) int64 { return int64(d.Last()) }},
}

// values returns the values assigned to f: edges, and values that do not fit (C and Go
// both keep the low bits).
func (f bitField) values() []int64 {
	max := int64(1)<<f.width - 1
	vs := []int64{0, 1, max, max + 1, max + 6, 0x5555555555 & max}
	if f.signed {
		half := int64(1) << (f.width - 1)
		vs = append(vs, -1, -half, half-1, half, -half-1)
	}
	if f.ctype == "unsigned char" || f.ctype == "unsigned short" {
		// Keep to the setter's Go type so C and Go convert the same value.
		var out []int64
		lim := int64(0xff)
		if f.ctype == "unsigned short" {
			lim = 0xffff
		}
		for _, v := range vs {
			if v >= 0 && v <= lim {
				out = append(out, v)
			}
		}
		vs = out
	}
	return vs
}

type bitCase struct {
	fill   byte
	assign []bitAssign
}

type bitAssign struct {
	f bitField
	v int64
}

func (c bitCase) String() string {
	var s []string
	for _, a := range c.assign {
		s = append(s, fmt.Sprintf("%s=%d", a.f.name, a.v))
	}
	return fmt.Sprintf("fill %#02x: %s", c.fill, strings.Join(s, ", "))
}

func bitCases() []bitCase {
	var cases []bitCase
	for _, fill := range []byte{0x00, 0xff, 0x5a} {
		for _, f := range bitFields {
			for _, v := range f.values() {
				cases = append(cases, bitCase{fill, []bitAssign{{f, v}}})
			}
		}
		// Every field at once, with distinct values.
		var all []bitAssign
		for i, f := range bitFields {
			all = append(all, bitAssign{f, int64(i*7+3) & (int64(1)<<f.width - 1)})
		}
		cases = append(cases, bitCase{fill, all})
	}
	return cases
}

// cBits runs the C side of the cases: one line per case, the struct's bytes in hex and
// then, per assignment, the value C reads back.
func cBits(t *testing.T, cases []bitCase) []string {
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <string.h>\n#include <golda.h>\n")
	src.WriteString("static void dump(const goldDesc *d) { const unsigned char *p = (const unsigned char *)d; for (size_t i = 0; i < sizeof *d; i++) printf(\"%02x\", p[i]); }\n")
	src.WriteString("int main(void) {\n\tgoldDesc d;\n")
	for _, c := range cases {
		fmt.Fprintf(&src, "\tmemset(&d, %#02x, sizeof d);\n", c.fill)
		for _, a := range c.assign {
			fmt.Fprintf(&src, "\td.%s = (%s)(%dLL);\n", a.f.name, a.f.ctype, a.v)
		}
		src.WriteString("\tdump(&d);\n")
		for _, a := range c.assign {
			fmt.Fprintf(&src, "\tprintf(\" %%lld\", (long long)d.%s);\n", a.f.name)
		}
		src.WriteString("\tprintf(\"\\n\");\n")
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	c := filepath.Join(dir, "bits.c")
	require.NoError(t, os.WriteFile(c, []byte(src.String()), 0o644))
	bin := filepath.Join(dir, "bits")
	require.NoError(t, goldentest.Compile(bin, c))
	out, err := exec.Command(bin).Output()
	require.NoError(t, err)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Len(t, lines, len(cases))
	return lines
}

func descBytes(d *GoldDesc) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(d)), unsafe.Sizeof(*d))
}

func TestBitFieldsMatchC(t *testing.T) {
	cases := bitCases()
	lines := cBits(t, cases)
	for i, c := range cases {
		fields := strings.Fields(lines[i])
		require.Len(t, fields, 1+len(c.assign), "C output for %v", c)
		want, err := hex.DecodeString(fields[0])
		require.NoError(t, err)

		// Go writes: the same bytes as C.
		var d GoldDesc
		b := descBytes(&d)
		require.Len(t, want, len(b), "sizeof(goldDesc)")
		for k := range b {
			b[k] = c.fill
		}
		for _, a := range c.assign {
			a.f.set(&d, a.v)
		}
		if !assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(b), "bytes after %v", c) {
			continue
		}

		// Go reads C's bytes: the value C reads back.
		var fromC GoldDesc
		copy(descBytes(&fromC), want)
		for k, a := range c.assign {
			cv, err := strconv.ParseInt(fields[1+k], 10, 64)
			require.NoError(t, err)
			assert.Equal(t, cv, a.f.get(&fromC), "%s read back after %v", a.f.name, c)
		}
	}
	t.Logf("%d bit-field assignments match gcc", len(cases))
}

// TestBitFieldsKeepNeighbours checks, without C, that a setter leaves every other byte
// and every other field as it was, and that values round-trip.
func TestBitFieldsKeepNeighbours(t *testing.T) {
	for _, f := range bitFields {
		for _, v := range f.values() {
			var d GoldDesc
			b := descBytes(&d)
			for k := range b {
				b[k] = 0xa5
			}
			d.Kind = -7
			d.Inner.A, d.Inner.B = 11, -12
			before := map[string]int64{}
			for _, o := range bitFields {
				before[o.name] = o.get(&d)
			}
			f.set(&d, v)
			want := v & (int64(1)<<f.width - 1)
			if f.signed && want&(int64(1)<<(f.width-1)) != 0 {
				want -= int64(1) << f.width
			}
			assert.Equal(t, want, f.get(&d), "%s = %d round trip", f.name, v)
			for _, o := range bitFields {
				if o.name != f.name {
					assert.Equal(t, before[o.name], o.get(&d), "%s changed by setting %s", o.name, f.name)
				}
			}
			assert.Equal(t, int32(-7), d.Kind)
			assert.Equal(t, GoldDesc_Inner{11, -12}, d.Inner)
			assert.Equal(t, uint8(0xa5), d.Name[0])
		}
	}
}
