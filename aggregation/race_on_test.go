//go:build race

package aggregation

const raceBuild = true
