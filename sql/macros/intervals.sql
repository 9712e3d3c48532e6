{#-
intervals.sql: merging overlapping intervals, written once.

The intervals are rows with start_ns and end_ns (neither NULL: the views leave out what
cannot be placed) in partitions (a device's kernels of one scope, say). They merge where
they overlap or touch. Sorted by (start_ns, end_ns) within its partition, an interval's
*earlier end* is the latest end_ns of the intervals before it (NULL for the first); the
rest follows from it:
  - merge_overlapping: an interval opens a new merged span when its start_ns is after its
    earlier end (or it is the first); each span runs from its first start to the latest
    end of its intervals. One row per span.
  - earlier_ends: the earlier end of each interval, under several filters in one sorted
    pass (one per scope: an interval's earlier end among the computation kernels, among
    all activities, ...). The part of an interval that no earlier one of the scope covers
    is its *piece*, [greatest(start_ns, earlier end), end_ns], empty unless end_ns is
    after its start. Pieces never overlap and cover the same instants as the spans, with
    one row per interval: lengths clipped to a window add up to the span lengths in it.

Example, one partition:
    interval      [0, 10]  [5, 20]  [20, 30]  [40, 50]  [42, 45]
    earlier end     NULL      10        20        30        50
    piece         [0, 10] [10, 20]  [20, 30]  [40, 50]   (empty)
    spans         [0, 30]                     [40, 50]

Use (a view's CTEs, then the macro's, then its final SELECT):
    {% from 'intervals.sql' import merge_overlapping %}
    WITH intervals AS (SELECT device_id, start_ns, end_ns FROM ...),
    {{ merge_overlapping('intervals', ['device_id']) }}
tests/views/test_macros.py runs both over inline rows: touching, nested and identical
intervals, single ones, empty partitions, NULL partition keys.
-#}

{#- The intervals before this one in its partition: the order and frame every sweep here
uses. -#}
{% macro earlier_window(partition_by) -%}
PARTITION BY {{ partition_by | join(', ') }}
ORDER BY start_ns, end_ns
ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
{%- endmacro %}

{#- Two CTEs and the final SELECT: one row per merged span of `intervals` (a relation
with the columns of `partition_by`, start_ns and end_ns): the partition's columns,
start_ns, end_ns. The CTEs are named flagged and numbered. -#}
{% macro merge_overlapping(intervals, partition_by) -%}
flagged AS (
    SELECT *,
           CASE WHEN start_ns <= max(end_ns) OVER ({{ earlier_window(partition_by) }})
                THEN 0 ELSE 1 END AS opens_span
    FROM {{ intervals }}
),
numbered AS (
    SELECT *,
           sum(opens_span) OVER (
               PARTITION BY {{ partition_by | join(', ') }}
               ORDER BY start_ns, end_ns
               ROWS UNBOUNDED PRECEDING) AS span_no
    FROM flagged
)
SELECT
    {{ partition_by | join(',\n    ') }},
    min(start_ns) AS start_ns,
    max(end_ns) AS end_ns
FROM numbered
GROUP BY {{ partition_by | join(', ') }}, span_no
{%- endmacro %}

{#- A SELECT: every row of `intervals` and, for each (column, filter) of `ends`, its
earlier end among the rows of its partition that meet the filter, in one sorted pass
(the window is named `before`). A piece of a scope then starts at
greatest(start_ns, <column>). -#}
{% macro earlier_ends(intervals, partition_by, ends) -%}
SELECT *,
{%- for column, condition in ends %}
           max(end_ns) FILTER (WHERE {{ condition }}) OVER before AS {{ column }}
           {{- "," if not loop.last }}
{%- endfor %}
    FROM {{ intervals }}
    WINDOW before AS ({{ earlier_window(partition_by) }})
{%- endmacro %}
