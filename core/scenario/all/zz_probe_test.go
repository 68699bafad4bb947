package all_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
)

func TestZZProbeStrings(t *testing.T) {
	re := regexp.MustCompile(`must be one of \[([^\]]*)\]`)
	for _, kind := range []string{"training", "inference", "serving", "operators", "ssm_tp", "collective", "eidola", "parallel_search"} {
		doc := minimal[kind]
		_, s, err := all.Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		base, _ := json.Marshal(s)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, base)
		if err != nil {
			t.Fatal(err)
		}
		want := formatTables(res)
		set := func(path []string, val any) []byte {
			var mm map[string]any
			json.Unmarshal(base, &mm)
			cur := mm
			for _, p := range path[:len(path)-1] {
				next, ok := cur[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					cur[p] = next
				}
				cur = next
			}
			cur[path[len(path)-1]] = val
			js, _ := json.Marshal(mm)
			return js
		}
		var walk func(prefix []string, v reflect.Value)
		walk = func(prefix []string, v reflect.Value) {
			ty := v.Type()
			for i := 0; i < ty.NumField(); i++ {
				f := ty.Field(i)
				if f.Anonymous && f.Type.Kind() == reflect.Struct {
					walk(prefix, v.Field(i))
					continue
				}
				tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if tag == "" || tag == "-" || tag == "kind" || tag == "name" || tag == "model" || tag == "gpu" {
					continue
				}
				path := append(append([]string{}, prefix...), tag)
				fv := v.Field(i)
				switch fv.Kind() {
				case reflect.String:
					_, _, err := all.Decode(set(path, "zzz"))
					if err == nil {
						continue
					}
					m := re.FindStringSubmatch(err.Error())
					if m == nil {
						continue
					}
					for _, alt := range strings.Split(m[1], ", ") {
						alt = strings.Trim(alt, `"`)
						if alt == fv.String() {
							continue
						}
						js := set(path, alt)
						_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, js)
						name := strings.Join(path, ".")
						if err != nil {
							msg := err.Error()
							if len(msg) > 110 {
								msg = msg[:110]
							}
							fmt.Printf("%s %s=%s: ERR %s\n", kind, name, alt, strings.ReplaceAll(msg, "\n", " "))
							continue
						}
						if formatTables(res) == want {
							fmt.Printf("%s %s=%s: NO EFFECT\n", kind, name, alt)
						}
					}
				case reflect.Struct:
					if len(prefix) < 2 {
						walk(path, fv)
					}
				}
			}
		}
		walk(nil, reflect.ValueOf(s).Elem())
	}
}
