package main

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// errName turns a status constant into its sentinel name: CUDA_ERROR_OUT_OF_MEMORY → ErrOutOfMemory.
func errName(prefixes []string, c string) string {
	var b strings.Builder
	b.WriteString("Err")
	for _, w := range statusWords(prefixes, c) {
		b.WriteString(strings.ToUpper(w[:1]) + strings.ToLower(w[1:]))
	}
	return b.String()
}

// describe turns a status constant into a short description: CUDA_ERROR_OUT_OF_MEMORY → "out of memory",
// ncclInvalidArgument → "invalid argument".
func describe(prefixes []string, c string) string {
	return strings.ToLower(strings.Join(statusWords(prefixes, c), " "))
}

// statusWords returns the words of a status constant without its prefix: split at
// underscores (CUDA_ERROR_OUT_OF_MEMORY) and, within a part, where a lower-case
// letter meets an upper-case one (NCCL's camel-case ncclInvalidArgument).
func statusWords(prefixes []string, c string) []string {
	n := c
	for _, p := range prefixes {
		if strings.HasPrefix(n, p) {
			n = strings.TrimPrefix(n, p)
			break
		}
	}
	var out []string
	for _, part := range strings.Split(n, "_") {
		start := 0
		for i := 1; i < len(part); i++ {
			if isUpper(part[i]) && isLower(part[i-1]) {
				out = append(out, part[start:i])
				start = i
			}
		}
		if start < len(part) {
			out = append(out, part[start:])
		}
	}
	return out
}

func isUpper(b byte) bool { return 'A' <= b && b <= 'Z' }
func isLower(b byte) bool { return 'a' <= b && b <= 'z' }

// emitStatus makes the library's status type an error with sentinel values.
func (g *gen) emitStatus(f *jen.File) error {
	s := g.lib.Spec
	d := g.statusDecl()
	if d == nil {
		if s.Status != "" {
			return fmt.Errorf("status type %s is not declared by the headers", s.Status)
		}
		return nil
	}
	if d.Kind != kindEnum {
		return fmt.Errorf("status type %s is not an enum", s.Status)
	}
	if d.Lib != g.lib {
		// A status type of another library's headers (cuBLASLt returns cuBLAS's
		// cublasStatus_t) is that library's type, errors and sentinels included:
		// one type per C type.
		return nil
	}
	T := d.GoName
	descs := map[string]string{}
	var sentinels []jen.Code
	names := map[string]string{}
	foundSuccess := false
	seen := map[uint64]bool{}
	for _, en := range enumerators(d.Type) {
		c := en.Token.SrcStr()
		_, u, _ := enumValue(en)
		if c == s.Success {
			foundSuccess = true
			continue
		}
		if !seen[u] {
			seen[u] = true
			descs[exportName(c)] = describe(s.ErrorPrefixes, c)
		}
		en := errName(s.ErrorPrefixes, c)
		if prev, ok := names[en]; ok {
			return fmt.Errorf("status values %s and %s both map to %s", prev, c, en)
		}
		names[en] = c
		sentinels = append(sentinels, jen.Id(en).Op("=").Id(exportName(c)))
	}
	if !foundSuccess {
		return fmt.Errorf("success value %s is not a value of %s", s.Success, s.Status)
	}
	recv := jen.Id("r").Id(T)
	f.Comment(fmt.Sprintf("Error implements error for a %s status: its C name, number and a short description.", s.Title))
	f.Comment(fmt.Sprintf("The names come from a table in this package, so they work even when %s cannot be loaded.", s.Title))
	f.Func().Params(recv).Id("Error").Params().String().Block(
		jen.Return(jen.Lit(s.Name+": ").Op("+").Id("r").Dot("String").Call().Op("+").Lit(" (").Op("+").
			Qual("strconv", "FormatInt").Call(jen.Int64().Call(jen.Id("r")), jen.Lit(10)).Op("+").Lit("): ").Op("+").Id("r").Dot("Description").Call()),
	)
	descVar := "descriptions" + T
	f.Comment("Description returns a short description of the status.")
	f.Func().Params(recv).Id("Description").Params().String().Block(
		jen.If(jen.List(jen.Id("d"), jen.Id("ok")).Op(":=").Id(descVar).Index(jen.Id("r")), jen.Id("ok")).Block(jen.Return(jen.Id("d"))),
		jen.If(jen.Id("r").Op("==").Id(exportName(s.Success))).Block(jen.Return(jen.Lit("success"))),
		jen.Return(jen.Lit("unknown status")),
	)
	f.Comment(fmt.Sprintf("Err returns nil for %s and the status itself otherwise.", s.Success))
	f.Func().Params(recv).Id("Err").Params().Error().Block(
		jen.If(jen.Id("r").Op("==").Id(exportName(s.Success))).Block(jen.Return(jen.Nil())),
		jen.Return(jen.Id("r")),
	)
	f.Var().Id(descVar).Op("=").Map(jen.Id(T)).String().Values(jen.DictFunc(func(dd jen.Dict) {
		for k, v := range descs {
			dd[jen.Id(k)] = jen.Lit(v)
		}
	}))
	f.Comment(fmt.Sprintf("Sentinel errors: every failing %s, for errors.Is.", T))
	f.Const().Defs(sentinels...)
	return nil
}
