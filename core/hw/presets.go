package hw

// GPUPresets returns every GPU preset, in a fixed order.
func GPUPresets() []GPU { return nil }

// LinkPresets returns every link preset, in a fixed order.
func LinkPresets() []Link { return nil }
