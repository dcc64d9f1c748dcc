package sample

import "testing"

func TestMedianWithout(t *testing.T) {
	if m := medianWithout([]float64{1, 2, 3, 4}, 4); m != 2 {
		t.Errorf("median of 1,2,3: %v", m)
	}
	if m := medianWithout([]float64{1, 2, 3, 4}, 1); m != 3 {
		t.Errorf("median of 2,3,4: %v", m)
	}
	if m := medianWithout([]float64{5, 7, 7}, 7); m != 6 {
		t.Errorf("median of 5,7: %v", m)
	}
}
