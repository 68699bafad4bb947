package net

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestHotLayout: the hot structures keep the sizes their comments promise
// (whole cache lines, or two links to a line); a field added carelessly
// would silently cost a cache miss per flow at 8,192 GPUs.
func TestHotLayout(t *testing.T) {
	require.Equal(t, uintptr(192), unsafe.Sizeof(flow{}), "flow: three 64-byte lines")
	require.Equal(t, uintptr(64), unsafe.Offsetof(flow{}.path), "flow: delivery fields fill the first line")
	require.Equal(t, uintptr(128), unsafe.Offsetof(flow{}.pos), "flow: start fields fill the second line")
	require.Equal(t, uintptr(32), unsafe.Sizeof(linkState{}))
	require.Equal(t, uintptr(64), unsafe.Sizeof(linkSlow{}))
	require.Equal(t, uintptr(16), unsafe.Sizeof(rankState{}))
	require.Equal(t, uintptr(64), unsafe.Sizeof(lastRoute{}))
}
