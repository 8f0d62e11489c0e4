#include "flight_ring.h"

#include <ctime>

namespace starling {
namespace flight {
namespace {

std::vector<Record> g_ring;
int64_t g_next = 0;

}  // namespace

double now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void configure(int64_t capacity) {
  g_ring.assign(capacity > 0 ? static_cast<size_t>(capacity) : 0, Record{-1, 0, 0, 0, 0.0, 0.0});
}

int64_t capacity() { return static_cast<int64_t>(g_ring.size()); }

int64_t next_index() { return g_next++; }

int64_t begin(int64_t tmpl, int64_t seq) {
  if (g_ring.empty()) return -1;
  const int64_t index = g_next++;
  g_ring[static_cast<size_t>(index) % g_ring.size()] = Record{index, tmpl, seq, kStarted, now(), 0.0};
  return index;
}

void complete(int64_t index) {
  if (index < 0 || g_ring.empty()) return;
  Record& r = g_ring[static_cast<size_t>(index) % g_ring.size()];
  if (r.index != index) return;
  r.state = kCompleted;
  r.end = now();
}

bool take(int64_t index, double* start) {
  if (index < 0 || g_ring.empty()) return false;
  Record& r = g_ring[static_cast<size_t>(index) % g_ring.size()];
  if (r.index != index) return false;
  *start = r.start;
  r.index = -1;
  return true;
}

std::vector<Record> snapshot() {
  std::vector<Record> out;
  for (const Record& r : g_ring) {
    if (r.index >= 0) out.push_back(r);
  }
  return out;
}

void clear() {
  for (Record& r : g_ring) r.index = -1;
}

}  // namespace flight
}  // namespace starling
