# The benchmark analysis scripts (bench/*.py) on hand-made inputs whose answers are worked out in
# the test: bench/power_phases.py (joules per weight) and bench/clock_phases.py (clock bursts).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME bench_power_and_clock_phases
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/phases_test.py ${PROJECT_SOURCE_DIR}/bench)
  set_tests_properties(bench_power_and_clock_phases PROPERTIES TIMEOUT 60 LABELS bench)
endif()
