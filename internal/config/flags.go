package config

import (
	"flag"
	"fmt"
)

// Flags binds config fields to the flags of one flag.FlagSet and records
// what the command line sets, for Load to apply over the file and the
// variables. Values are checked by Load, so a bad value is reported with
// every other problem, naming the flag. The zero value is ready to use.
type Flags struct {
	config    string
	configSet bool
	set       []flagValue // in command-line order
}

type flagValue struct {
	f     *field
	value string
}

// Register adds --config and the flags of the config fields named by their
// YAML keys to fs; with no keys, every field that has a flag. It panics on
// a key without a flag: that is a programming error.
func (fl *Flags) Register(fs *flag.FlagSet, keys ...string) {
	fs.Var(&configFlag{fl}, "config", "configuration `FILE` (default $"+EnvFile+", else ./"+DefaultFile+" if present; \"\" for none)")
	if len(keys) == 0 {
		for _, f := range fields {
			if f.flag != "" {
				keys = append(keys, f.key)
			}
		}
	}
	def := Default()
	for _, k := range keys {
		f := fieldByKey(k)
		if f == nil || f.flag == "" {
			panic(fmt.Sprintf("config: Register: %q is not a config key with a flag", k))
		}
		fs.Var(&fieldFlag{fl: fl, f: f, def: f.format(def)}, f.flag, fmt.Sprintf("%s (%s, $%s)", f.usage, f.key, f.env))
	}
}

// apply sets c's fields from the recorded flags: the last value of a
// scalar, every value of a list.
func (fl *Flags) apply(c *Config, dir string) []error {
	var order []*field
	values := map[*field][]string{}
	for _, s := range fl.set {
		if _, ok := values[s.f]; !ok {
			order = append(order, s.f)
		}
		values[s.f] = append(values[s.f], s.value)
	}
	var errs []error
	for _, f := range order {
		src := source{name: "--" + f.flag}
		vs := values[f]
		if f.isList() {
			var items []string
			for _, v := range vs {
				items = append(items, splitList(v)...)
			}
			if err := f.setList(c, items); err != nil {
				errs = append(errs, &SourceError{Source: src.name, Err: invalid(f.key, err)})
				continue
			}
			c.sources[f.key] = src
			continue
		}
		if err := c.setFrom(f, vs[len(vs)-1], src, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// fieldFlag is the flag.Value of a config field. Set only records.
type fieldFlag struct {
	fl  *Flags
	f   *field
	def string
}

func (v *fieldFlag) String() string { return v.def }

func (v *fieldFlag) Set(s string) error {
	v.fl.set = append(v.fl.set, flagValue{f: v.f, value: s})
	return nil
}

// TypeName names the kind of value the flag takes, for usage text.
func (v *fieldFlag) TypeName() string { return v.f.typeName() }

// configFlag is the flag.Value of --config.
type configFlag struct{ fl *Flags }

func (v *configFlag) String() string { return "" }

func (v *configFlag) Set(s string) error {
	v.fl.config, v.fl.configSet = s, true
	return nil
}
