package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"modernc.org/cc/v4"
)

// Malformed headers can keep cc busy forever, and cc cannot be stopped from outside,
// so parseHeaders hands it only input it has checked. The ways found:
//
//   - The parser skips an unexpected token with a shift that does nothing at the end
//     of input. A loop that skips tokens until it sees one it expects (the type
//     qualifiers after '*', the enum specifier after a final 'enum', ...) then spins
//     forever at the end of the translation unit, appending an error each time, so
//     memory grows without bound: a header that ends in 'enum' or 'int *', or whose
//     last declaration is broken ('int *;'). The check below rejects a translation
//     unit that ends inside a declaration, naming the header, and the sentinel (see
//     tail) brings a parser lost in a broken declaration back to file scope.
//   - EvalAllMacros parses every object-like macro's expansion, followed by ';', with
//     the same parser: '#define X (int *' spins the same way. The macros whose
//     expansion could do that are undefined before cc evaluates them (their value
//     could not have been a constant).
//   - cc's limit on #include nesting never triggers (it counts a level only while
//     the #include line is executed, not while the file is read), so a header that
//     includes itself without an include guard is read forever, also inside the
//     arguments of a macro call that is never closed, where no output comes.
//   - cc reads a file to its end before it looks at it: #include "/dev/zero".
//
// checkHeaders preprocesses the translation unit once on its own with cc.Preprocess.
// Every file comes through markedFS, which refuses devices and huge files and puts a
// marker #pragma at the start and end of each; cc calls the PragmaHandler as it
// meets them, and the handler, which then knows the nesting, the number of files
// read and the time taken, stops cc by panicking when a limit is passed. The output
// goes, token by token, to a writer that checks it.

// Limits of the check. The CUDA 13 headers (cuDNN included) preprocess to under 1 MB
// with about 650 000 units of macro expansion work, from a few hundred files read.
const (
	// maxIncludeDepth is gcc's limit on #include nesting.
	maxIncludeDepth = 200
	// maxInclusions bounds the files read (each #include of a file counts, even one
	// its include guard then skips).
	maxInclusions = 20_000
	// expansionLimit bounds macro expansion (cc.Config.ExpansionLimit), which can
	// grow exponentially.
	expansionLimit = 10_000_000
	// maxPreprocessed bounds the preprocessed translation unit, in bytes.
	maxPreprocessed = 64 << 20
	// maxHeaderSize bounds one header file, in bytes.
	maxHeaderSize = 64 << 20
)

// preprocessTimeout bounds the time the check takes (the CUDA headers take half a
// second); FuzzHeader shortens it.
var preprocessTimeout = time.Minute

// probeName names the source of the macro probes.
const probeName = "<gocuda-probe>"

// markers are the names checkHeaders adds to the translation unit. Each check draws
// a random suffix for them, so that a header cannot write one and mislead it.
type markers struct {
	begin    string // #pragma begin ID: the file with that id starts
	end      string // #pragma end ID: it ends
	probe    string // probe + N: the expansion of macro N follows
	probeEnd string // the probes end
	close    string // ends each probe line, see probeParens
}

func newMarkers() markers {
	n := fmt.Sprintf("%016x", rand.Uint64())
	return markers{begin: "__gocuda_file_" + n, end: "__gocuda_eof_" + n, probe: "__gocuda_probe_" + n + "_",
		probeEnd: "__gocuda_probes_end_" + n, close: "__gocuda_close_" + n}
}

// abort is the panic that stops cc.Preprocess; the reason is in tuChecker.err.
type abort struct{}

// checkHeaders preprocesses sources (with cfg, whose FS it replaces) and checks the
// result: #include nesting and counts, the size and time it takes, and that the
// translation unit does not end inside a declaration. It returns the macros cc must
// not evaluate (see probeToken), or an error that names the header at fault.
func checkHeaders(cfg *cc.Config, sources []cc.Source) (noEval []string, err error) {
	fsys := &markedFS{mark: newMarkers(), ids: map[string]int{}, definedIn: map[string]string{}}
	fsys.scanDefines("<predefined>", []byte(cfg.Predefined))
	fsys.scanDefines("<builtin>", []byte(cc.Builtin))
	w := &tuChecker{fsys: fsys, start: time.Now(), probe: -1, ended: -1}
	c := *cfg
	c.FS = fsys
	c.FSOnly = true // cc reads every file through fsys, never on its own
	c.EvalAllMacros = false
	c.ExpansionLimit = expansionLimit
	c.PragmaHandler = w.pragma
	srcs := append(append([]cc.Source{}, sources...), cc.Source{Name: probeName, Value: &probeSource{fsys: fsys}})
	err = w.preprocess(&c, srcs)
	switch {
	case fsys.refused != nil:
		return nil, fsys.refused
	case w.err != nil:
		return nil, w.err
	case err != nil:
		// An error in the probe only means that macro is not evaluated, unless it
		// ran out of expansion work: that stops the preprocessor, and the macros
		// after it would go unevaluated without a word.
		var rest []string
		for _, l := range strings.Split(err.Error(), "\n") {
			pos, ok := strings.CutPrefix(l, probeName+":")
			if !ok {
				rest = append(rest, l)
				continue
			}
			line, _, _ := strings.Cut(pos, ":")
			i, err := strconv.Atoi(line)
			i-- // lines count from 1
			if err != nil || i < 0 || i >= len(fsys.probed) {
				continue
			}
			name := fsys.probed[i]
			if strings.Contains(l, "expansion limit exceeded") {
				return nil, fmt.Errorf("%s: macro expansion exceeds its limit of %d units of work at macro %s (one that grows exponentially?)", fsys.definedIn[name], expansionLimit, name)
			}
			w.probeFailed(i)
		}
		if len(rest) != 0 {
			return nil, errors.New(shortErrors(errors.New(strings.Join(rest, "\n")), ""))
		}
	}
	if !w.headersDone {
		w.endHeaders()
	}
	if w.err != nil {
		return nil, w.err
	}
	for i, n := range fsys.probed {
		if !w.safe[i] {
			noEval = append(noEval, n)
		}
	}
	return noEval, nil
}

// preprocess runs cc.Preprocess, turning a panic inside cc (its own, or abort) into
// an error.
func (c *tuChecker) preprocess(cfg *cc.Config, sources []cc.Source) (err error) {
	defer func() {
		switch e := recover(); e.(type) {
		case nil:
		case abort:
			err = c.err
		default:
			err = fmt.Errorf("%s: cc failed: %v", c.fsys.name(c.current()), e)
		}
	}()
	return cc.Preprocess(cfg, sources, c)
}

// markedFS serves header files to cc.Preprocess between marker pragmas, and collects
// the names the files #define.
type markedFS struct {
	mark      markers
	paths     []string          // file id → path
	ids       map[string]int    // path → file id
	definedIn map[string]string // name → the first file that #defines it
	probed    []string          // the macros probeSource expands, in order
	refused   error             // the first file it refused to read
}

// Open implements fs.FS for cc, which passes the path it wants to read as is. It
// refuses what cc would read forever or nearly (a device, a FIFO, a huge file).
func (m *markedFS) Open(name string) (fs.File, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	switch {
	case info.IsDir():
		return nil, fs.ErrNotExist // as cc's own lookup treats one
	case !info.Mode().IsRegular():
		return nil, m.refuse(fmt.Errorf("%s: not a regular file", name))
	case info.Size() > maxHeaderSize:
		return nil, m.refuse(fmt.Errorf("%s: larger than %d MB", name, maxHeaderSize>>20))
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHeaderSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxHeaderSize {
		return nil, m.refuse(fmt.Errorf("%s: larger than %d MB", name, maxHeaderSize>>20))
	}
	m.scanDefines(name, b)
	id, ok := m.ids[name]
	if !ok {
		id = len(m.paths)
		m.ids[name] = id
		m.paths = append(m.paths, name)
	}
	// #line 1 keeps the header's own line numbers in cc's errors. The end marker
	// goes on a line of its own where the end of the file was, after a blank line
	// if the last line is continued with a backslash.
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "#pragma %s %d\n#line 1\n", m.mark.begin, id)
	buf.Write(b)
	if !bytes.HasSuffix(b, []byte("\n")) {
		buf.WriteByte('\n')
	}
	if t := bytes.TrimRight(buf.Bytes(), "\r\n"); bytes.HasSuffix(t, []byte("\\")) {
		buf.WriteByte('\n')
	}
	fmt.Fprintf(&buf, "#pragma %s %d\n", m.mark.end, id)
	return &memFile{Reader: bytes.NewReader(buf.Bytes()), info: info}, nil
}

// refuse records the first file markedFS refused to read, and returns err.
func (m *markedFS) refuse(err error) error {
	if m.refused == nil {
		m.refused = err
	}
	return err
}

// memFile is a file markedFS serves from memory.
type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// name returns the path of file id, or what the tokens outside every file are.
func (m *markedFS) name(id int) string {
	if id < 0 || id >= len(m.paths) {
		return "the translation unit"
	}
	return m.paths[id]
}

// scanDefines records the names that follow "define" in C source: every macro the
// source can define, and more (names in comments, strings and #if 0 do no harm).
func (m *markedFS) scanDefines(file string, src []byte) {
	prevDefine := false
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			if j := bytes.Index(src[i+2:], []byte("*/")); j >= 0 {
				i += j + 4
			} else {
				i = len(src)
			}
		case c == '"' || c == '\'':
			for i++; i < len(src) && src[i] != c && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			i++
			prevDefine = false
		case isIdentStart(c):
			j := i
			for j < len(src) && (isIdentStart(src[j]) || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			w := string(src[i:j])
			if _, ok := m.definedIn[w]; prevDefine && !ok {
				m.definedIn[w] = file
			}
			prevDefine = w == "define"
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\\' || c == '\f' || c == '\v':
			i++
		default:
			prevDefine = false
			i++
		}
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// notProbed are names the preprocessor treats specially in text, and the probe's
// own; they are never evaluated as macros of the headers.
var notProbed = map[string]bool{
	"_Pragma": true, "defined": true, "__VA_ARGS__": true, "__VA_OPT__": true,
	"__has_include": true, "__has_include_next": true, "__has_feature": true,
	"__has_extension": true, "__has_builtin": true, "__has_attribute": true,
	"__has_c_attribute": true, "__has_cpp_attribute": true, "__has_embed": true,
}

// probeParens is the number of ')' after the close marker that ends each probe
// line: an expansion that ends inside a macro call (of up to that many parentheses)
// takes some of them as arguments, instead of the lines after it, and shows it did.
const probeParens = 8

// probeSource is the source after the headers in checkHeaders: for every name the
// sources #define, a line "<probe marker>N NAME <close marker> ) ) ...", which the
// preprocessor turns into the marker and the expansion of NAME as cc evaluates it,
// at the end of the translation unit. cc reads this source only once the headers
// are read, when every name is known.
type probeSource struct {
	fsys *markedFS
	r    *strings.Reader
}

func (p *probeSource) Read(b []byte) (int, error) {
	if p.r == nil {
		var names []string
		for n := range p.fsys.definedIn {
			if !notProbed[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		p.fsys.probed = names
		var s strings.Builder
		m := p.fsys.mark
		for i, n := range names {
			fmt.Fprintf(&s, "%s%d %s %s%s\n", m.probe, i, n, m.close, strings.Repeat(" )", probeParens))
		}
		s.WriteString(m.probeEnd + "\n")
		p.r = strings.NewReader(s.String())
	}
	return p.r.Read(b)
}

// tuChecker checks the translation unit as cc.Preprocess reads and writes it.
type tuChecker struct {
	fsys       *markedFS
	start      time.Time
	size       int
	n          int
	inclusions int
	err        error // set once; cc is stopped

	// The headers.
	files       []int  // ids of the headers being read, innermost last
	ended       int    // id of the header that ended last, or -1
	last        string // the last token
	lastFile    int
	headersDone bool

	// The macro probes.
	probe    int          // index of the macro whose expansion is being read, or -1
	open     []byte       // its brackets not closed yet
	bad      bool         // its expansion is not safe
	closing  int          // the ')' after the close marker seen, or -1 before it
	safe     map[int]bool // macros whose expansion is safe
	badProbe map[int]bool // macros cc reported an error for
}

// fail records err as the reason to stop cc.
func (c *tuChecker) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// pragma is cc's PragmaHandler: it follows the marker pragmas of markedFS, and stops
// cc (panicking with abort, which preprocess recovers) when a limit is passed.
func (c *tuChecker) pragma(toks []cc.Token) error {
	var words []string
	for _, t := range toks {
		if s := strings.TrimSpace(t.SrcStr()); s != "" {
			words = append(words, s)
		}
	}
	m := c.fsys.mark
	if len(words) != 2 || words[0] != m.begin && words[0] != m.end {
		return nil
	}
	id, err := strconv.Atoi(words[1])
	if err != nil {
		return nil
	}
	if words[0] == m.end {
		for i := len(c.files) - 1; i >= 0; i-- {
			if c.files[i] == id {
				c.files = c.files[:i]
				break
			}
		}
		c.ended = id
		return nil
	}
	c.files = append(c.files, id)
	c.inclusions++
	switch {
	case len(c.files) > maxIncludeDepth:
		c.fail(c.nestingError())
	case c.inclusions > maxInclusions:
		c.fail(fmt.Errorf("%s: more than %d #includes (headers without include guards that include each other?)", c.fsys.name(id), maxInclusions))
	case c.inclusions%256 == 0 && time.Since(c.start) > preprocessTimeout:
		c.fail(fmt.Errorf("%s: preprocessing the headers did not finish within %v", c.fsys.name(id), preprocessTimeout))
	}
	if c.err != nil {
		panic(abort{})
	}
	return nil
}

// Write implements io.Writer for cc.Preprocess, which writes each token (and each
// separator) with one call. An error stops the preprocessor.
func (c *tuChecker) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.size += len(p)
	c.n++
	switch {
	case c.size > maxPreprocessed:
		c.fail(fmt.Errorf("%s: the preprocessed headers exceed %d MB", c.fsys.name(c.current()), maxPreprocessed>>20))
	case c.n%4096 == 0 && time.Since(c.start) > preprocessTimeout:
		c.fail(fmt.Errorf("%s: preprocessing the headers did not finish within %v", c.fsys.name(c.current()), preprocessTimeout))
	}
	if tok := string(bytes.TrimSpace(p)); tok != "" && c.err == nil {
		c.token(tok)
	}
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

// current is the id of the header the tokens come from, or -1. Between headers it
// is the one that ended last: a macro call that runs past its end writes there.
func (c *tuChecker) current() int {
	if len(c.files) == 0 {
		return c.ended
	}
	return c.files[len(c.files)-1]
}

func (c *tuChecker) token(tok string) {
	m := c.fsys.mark
	if s, ok := strings.CutPrefix(tok, m.probe); ok {
		i, err := strconv.Atoi(s)
		if err != nil {
			i = -1
		}
		c.startProbe(i)
		return
	}
	if tok == m.probeEnd {
		c.startProbe(len(c.fsys.probed))
		return
	}
	if !c.headersDone {
		c.last, c.lastFile = tok, c.current()
		return
	}
	if c.probe < 0 {
		return
	}
	switch {
	case tok == m.close && c.closing < 0:
		c.closing = 0
	case c.closing >= 0:
		if tok == ")" {
			c.closing++
		} else {
			c.bad = true
		}
	default:
		c.probeToken(tok)
	}
}

// startProbe ends the probe being read, if any, and starts probe i (past the last
// one: the end).
func (c *tuChecker) startProbe(i int) {
	if !c.headersDone {
		if i != 0 {
			// The first marker went into a macro call the headers did not close.
			c.fail(fmt.Errorf("%s: the headers end inside a macro call", c.fsys.name(c.lastFile)))
		}
		c.endHeaders()
	}
	if c.probe >= 0 && !c.bad && len(c.open) == 0 && c.closing == probeParens && !c.badProbe[c.probe] {
		if c.safe == nil {
			c.safe = map[int]bool{}
		}
		c.safe[c.probe] = true
	}
	c.probe, c.open, c.bad, c.closing = i, c.open[:0], false, -1
}

// endHeaders checks the end of the headers: every declaration at file scope ends in
// ';' or '}', and a translation unit that ends in anything else would leave cc's
// parser at the end of its input inside a declaration. (A broken declaration before
// that, an unclosed bracket say, is left to cc, which says where; the sentinel in
// tail keeps its parser from spinning there.)
func (c *tuChecker) endHeaders() {
	c.headersDone = true
	if c.last != "" && c.last != ";" && c.last != "}" {
		c.fail(fmt.Errorf("%s: the headers end inside a declaration, at %q (is the header cut short?)", c.fsys.name(c.lastFile), clip(c.last, 40)))
	}
}

// nestingError describes #include nesting past maxIncludeDepth: the header that
// occurs most often on the include stack and, where it includes itself, the cycle.
func (c *tuChecker) nestingError() error {
	count := map[int]int{}
	top := c.current()
	for _, id := range c.files {
		if count[id]++; count[id] > count[top] {
			top = id
		}
	}
	name := c.fsys.name(top)
	if count[top] < 2 {
		return fmt.Errorf("%s: #include nested more than %d deep", name, maxIncludeDepth)
	}
	// The cycle: the stack between the last two occurrences of the header.
	j := len(c.files) - 1
	for c.files[j] != top {
		j--
	}
	i := j - 1
	for c.files[i] != top {
		i--
	}
	var cycle []string
	for _, id := range c.files[i : j+1] {
		cycle = append(cycle, filepath.Base(c.fsys.name(id)))
	}
	return fmt.Errorf("%s: #include nested more than %d deep: the header includes itself (%s) without an include guard",
		name, maxIncludeDepth, clip(strings.Join(cycle, " → "), 200))
}

// probeToken takes a token of a macro's expansion. cc evaluates the expansion by
// parsing "expansion ;", and its parser can only spin at the end of that input if a
// loop inside the expansion skipped the ';'. With brackets that nest and no braces
// or ';' of its own (which no constant expression has), every loop ends inside the
// expansion: such an expansion is safe.
func (c *tuChecker) probeToken(tok string) {
	switch tok {
	case "(", "[":
		c.open = append(c.open, tok[0])
	case ")", "]":
		want := byte('(')
		if tok == "]" {
			want = '['
		}
		if n := len(c.open); n != 0 && c.open[n-1] == want {
			c.open = c.open[:n-1]
		} else {
			c.bad = true
		}
	case "{", "}", ";":
		c.bad = true
	}
}

// probeFailed marks macro i as unsafe: the preprocessor reported an error in its
// expansion.
func (c *tuChecker) probeFailed(i int) {
	if c.badProbe == nil {
		c.badProbe = map[int]bool{}
	}
	c.badProbe[i] = true
	delete(c.safe, i)
}
