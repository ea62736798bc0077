package sandbox

import (
	"errors"

	"github.com/execbox/execbox"
)

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		// Every problem at once: what decoded is checked too.
		err := execbox.DecodeSettings(Name, opts.Settings, &o)
		if err := errors.Join(append([]error{err}, o.validate()...)...); err != nil {
			return nil, err
		}
		o.Logger = opts.Logger
		return New(o), nil
	})
}
