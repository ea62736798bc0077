package sandbox

import (
	"errors"

	"github.com/execbox/execbox"
)

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		if err := execbox.DecodeSettings(Name, opts.Settings, &o); err != nil {
			return nil, err
		}
		if errs := o.validate(); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		o.Logger = opts.Logger
		return New(o), nil
	})
}
