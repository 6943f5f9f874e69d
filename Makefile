# nrtrewrite developer targets.  Other targets are added by their owners.

NRTREWRITE ?= nrtrewrite
FIXTURE_SPECS := $(sort $(wildcard fixtures/*.yaml fixtures/bad/*.yaml))

.PHONY: fixtures
## fixtures: rebuild every fixtures/<name>.neff from fixtures/<name>.yaml (byte-deterministic)
fixtures:
	@set -e; for spec in $(FIXTURE_SPECS); do \
		$(NRTREWRITE) assemble "$$spec" -o "$${spec%.yaml}.neff"; \
	done
